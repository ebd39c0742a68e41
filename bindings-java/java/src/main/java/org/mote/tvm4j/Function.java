package org.mote.tvm4j;

import java.util.ArrayList;
import java.util.List;

/**
 * tvm4j's function: a function of a {@link Module}, a global function registered with Mote
 * ({@link #getFunction}), Java code made into one ({@link #convertFunc},
 * {@link #register}), or a function on an RPC server ({@link org.mote.tvm4j.rpc.RPCSession},
 * a remote {@link Module}; it runs there, through {@link org.mote.rpc.RemoteFunction}). Call it
 * with {@code pushArg(...)...invoke()} or {@link #call}; both return a {@link TVMValue}.
 *
 * <p>Arguments collect in this object, one thread at a time ({@link #call} may be used from
 * several threads). {@link #release()} ends this object (a second call does nothing; a
 * released function throws {@link IllegalStateException} when used); releasing the function
 * {@link #convertFunc} returned also unregisters its callback. A callback runs on the caller's
 * thread or on one of a session's worker threads, so it must be thread-safe; an exception it
 * throws fails the call with an {@link org.mote.CallbackException} carrying its text.
 *
 * <p>A remote function takes numbers, strings, byte[]s, remote functions, modules and arrays
 * of its session (arrays made on its devices, or returned by its functions), and devices
 * ({@link org.mote.tvm4j.rpc.TVMRemoteDevice}s or plain ones); it returns arrays living on the
 * server. A local function takes local arrays only. An error on the server throws
 * {@link org.mote.rpc.RpcRemoteException} with the server's message.
 */
public class Function extends TVMObject {
    /** Java code Mote can call. */
    public interface Callback {
        /**
         * Runs the code. An array argument is a copy Mote frees when the callback returns
         * (copy its data, or {@link TensorBase#copyTo} it, to keep it).
         *
         * @param args the arguments
         * @return null, a number, a Boolean, a String, a byte[], a {@link TensorBase}, a
         *     {@link Function} or a {@link TVMValue} of one of them
         */
        Object invoke(TVMValue... args);
    }

    /** The local function; null for a remote one. */
    private final org.mote.Function impl;
    /** The remote function; null for a local one. */
    private final org.mote.rpc.RemoteFunction remote;
    /** A remote function's pushed arguments, as {@link org.mote.rpc.RemoteFunction} takes them. */
    private final List<Object> pending = new ArrayList<>();
    private final boolean owner;
    private volatile boolean released;

    Function(org.mote.Function impl, boolean owner) {
        super(TypeIndex.kTVMFFIFunction);
        this.impl = impl;
        this.remote = null;
        this.owner = owner;
    }

    Function(org.mote.rpc.RemoteFunction remote) {
        super(TypeIndex.kTVMFFIFunction);
        this.impl = null;
        this.remote = remote;
        this.owner = true;
    }

    /**
     * A function of Mote's RPC client as a tvm4j function (a Mote addition: tvm4j makes remote
     * functions itself, through {@link org.mote.tvm4j.rpc.RPCSession}). {@link #release()}
     * frees it on the server.
     *
     * @param function the remote function
     * @return the tvm4j function wrapping it
     */
    public static Function remote(org.mote.rpc.RemoteFunction function) {
        return new Function(java.util.Objects.requireNonNull(function, "function"));
    }

    private String name() {
        if (impl != null) {
            return impl.name();
        }
        return remote.name() != null ? remote.name() : "remote";
    }

    org.mote.Function mote() {
        if (released) {
            throw new IllegalStateException("Function `" + name() + "` is released");
        }
        if (remote != null) {
            throw new UnsupportedOperationException("Function `" + name() + "` runs on an RPC"
                    + " server: it has no local org.mote.Function (see remoteFunction())");
        }
        return impl;
    }

    /** The remote function, or null for a local one. */
    private org.mote.rpc.RemoteFunction remoteOrNull() {
        if (released) {
            throw new IllegalStateException("Function `" + name() + "` is released");
        }
        return remote;
    }

    /** For a remote function: adds the argument to its list and returns true; else false. */
    private boolean pushRemote(Object arg, String what) {
        if (remoteOrNull() == null) {
            return false;
        }
        pending.add(Convert.toRemote(arg, what));
        return true;
    }

    /**
     * The global function {@code name}.
     *
     * @param name the function's global name
     * @return the function, or null when no function has that name
     */
    public static Function getFunction(final String name) {
        org.mote.Function f = org.mote.Function.getFunction(name);
        return f == null ? null : new Function(f, false);
    }

    /**
     * Registers {@code function} as the global function {@code name}.
     *
     * @param name the global name
     * @param function the Java code
     * @param override whether to replace a function already registered under {@code name}
     * @throws IllegalStateException when {@code override} is false and {@code name} is taken
     */
    public static void register(String name, Callback function, boolean override) {
        java.util.Objects.requireNonNull(function, "function");
        if (!override && org.mote.Function.getFunction(name) != null) {
            throw new IllegalStateException("a global function `" + name + "` is already registered");
        }
        org.mote.Function.register(name, adapt(function));
    }

    /**
     * Registers {@code function} as the global function {@code name}, which must not be taken.
     *
     * @param name the global name
     * @param function the Java code
     * @throws IllegalStateException when a function is already registered under {@code name}
     */
    public static void register(String name, Callback function) {
        register(name, function, false);
    }

    /**
     * Makes Java code a function (registered under a fresh name, so it can also be passed to
     * and returned from functions). {@link #release()} unregisters it.
     *
     * @param function the Java code
     * @return the function
     */
    public static Function convertFunc(Callback function) {
        java.util.Objects.requireNonNull(function, "function");
        return new Function(org.mote.Function.convertFunc(adapt(function)), true);
    }

    private static org.mote.Function.Callback adapt(Callback cb) {
        return args -> Convert.toMote(cb.invoke(Convert.arguments(args)), "the callback's return value");
    }

    @Override
    public Function asFunction() {
        return this;
    }

    /**
     * Calls the function with the pushed arguments (then forgets them).
     *
     * @return the result ({@link TVMValueNull} for none: a kernel writes its outputs into the
     *     arrays passed)
     * @throws IllegalStateException when the function is released
     * @throws UnsupportedOperationException when the result has no tvm4j form (a tuple, a shape)
     */
    public TVMValue invoke() {
        org.mote.rpc.RemoteFunction r = remoteOrNull();
        if (r != null) {
            Object[] args = pending.toArray();
            pending.clear();
            return Convert.result(r.call(args));
        }
        return Convert.result(mote().invoke());
    }

    /**
     * Adds an integer argument.
     *
     * @param arg the value
     * @return this
     */
    public Function pushArg(int arg) {
        if (!pushRemote((long) arg, "pushArg(int)")) {
            mote().pushArg((long) arg);
        }
        return this;
    }

    /**
     * Adds an integer argument.
     *
     * @param arg the value
     * @return this
     */
    public Function pushArg(long arg) {
        if (!pushRemote(arg, "pushArg(long)")) {
            mote().pushArg(arg);
        }
        return this;
    }

    /**
     * Adds a float argument.
     *
     * @param arg the value
     * @return this
     */
    public Function pushArg(float arg) {
        if (!pushRemote((double) arg, "pushArg(float)")) {
            mote().pushArg((double) arg);
        }
        return this;
    }

    /**
     * Adds a float argument.
     *
     * @param arg the value
     * @return this
     */
    public Function pushArg(double arg) {
        if (!pushRemote(arg, "pushArg(double)")) {
            mote().pushArg(arg);
        }
        return this;
    }

    /**
     * Adds a string argument.
     *
     * @param arg the value
     * @return this
     */
    public Function pushArg(String arg) {
        if (!pushRemote(arg, "pushArg(String)")) {
            mote().pushArg(arg);
        }
        return this;
    }

    /**
     * Adds an array argument ({@link Tensor} or {@link NDArray}); a kernel may write it. A local
     * function takes local arrays, a remote function arrays of its session's server.
     *
     * @param arg the array
     * @return this
     * @throws IllegalArgumentException for an array of the other kind
     */
    public Function pushArg(TensorBase arg) {
        if (!pushRemote(arg, "pushArg(TensorBase)")) {
            mote().pushArg(arg.local("pushArg(TensorBase)"));
        }
        return this;
    }

    /**
     * A module argument: a remote module of a remote function's session; Mote cannot pass
     * local modules to functions.
     *
     * @param arg the module
     * @return this
     * @throws IllegalArgumentException for a local module, or a local function's argument
     */
    public Function pushArg(Module arg) {
        if (!pushRemote(arg, "pushArg(Module)")) {
            Convert.toMote(arg, "pushArg(Module)");
        }
        return this;
    }

    /**
     * Adds a function argument: a registered or converted function (not a function of a
     * {@link Module}, which Mote cannot pass); for a remote function, a remote function of its
     * session.
     *
     * @param arg the function
     * @return this
     */
    public Function pushArg(Function arg) {
        if (!pushRemote(arg, "pushArg(Function)")) {
            mote().pushArg(arg.mote());
        }
        return this;
    }

    /**
     * Adds a byte-string argument (copied when the call starts).
     *
     * @param arg the bytes
     * @return this
     */
    public Function pushArg(byte[] arg) {
        if (!pushRemote(arg, "pushArg(byte[])")) {
            mote().pushArg(arg);
        }
        return this;
    }

    /**
     * A device argument, for a remote function (a {@link org.mote.tvm4j.rpc.TVMRemoteDevice}
     * crosses without its session mask); Mote cannot pass devices to local functions.
     *
     * @param arg the device
     * @return this
     * @throws IllegalArgumentException for a local function
     */
    public Function pushArg(Device arg) {
        if (!pushRemote(arg, "pushArg(Device)")) {
            Convert.toMote(arg, "pushArg(Device)");
        }
        return this;
    }

    /**
     * Calls the function with these arguments.
     *
     * @param args Integer, Long, Float, Double, Boolean, String, byte[], arrays, functions,
     *     {@link TVMValue}s of those, null (and modules and devices for a remote function)
     * @return the result, as {@link #invoke()}
     * @throws IllegalArgumentException for an argument Mote cannot pass
     */
    public TVMValue call(Object... args) {
        org.mote.rpc.RemoteFunction r = remoteOrNull();
        if (r != null) {
            return Convert.result(r.call(Convert.toRemote(args)));
        }
        return Convert.result(mote().call(Convert.toMote(args)));
    }

    /**
     * Ends this function object; for the function {@link #convertFunc} returned, also
     * unregisters the callback; for a remote function, frees it on the server. A second call
     * does nothing.
     */
    @Override
    public void release() {
        if (released) {
            return;
        }
        released = true;
        if (remote != null) {
            remote.close();
        } else if (owner) {
            impl.release();
        }
    }

    /**
     * The function in Mote's idiomatic layer.
     *
     * @return the function
     * @throws IllegalStateException when this function is released
     * @throws UnsupportedOperationException for a remote function (see {@link #remoteFunction()})
     */
    public org.mote.Function moteFunction() {
        return mote();
    }

    /**
     * The remote function in Mote's idiomatic layer (a Mote addition).
     *
     * @return the function, or null when this function is not remote
     * @throws IllegalStateException when this function is released
     */
    public org.mote.rpc.RemoteFunction remoteFunction() {
        return remoteOrNull();
    }

    @Override
    public String toString() {
        return "Function(" + name() + (remote != null ? ", remote" : "") + (released ? ", released" : "") + ")";
    }
}
