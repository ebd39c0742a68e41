package org.mote.tvm4j;

/**
 * tvm4j's function: a function of a {@link Module}, a global function registered with Mote
 * ({@link #getFunction}), or Java code made into one ({@link #convertFunc},
 * {@link #register}). Call it with {@code pushArg(...)...invoke()} or {@link #call}; both
 * return a {@link TVMValue}.
 *
 * <p>Arguments collect in this object, one thread at a time ({@link #call} may be used from
 * several threads). {@link #release()} ends this object (a second call does nothing; a
 * released function throws {@link IllegalStateException} when used); releasing the function
 * {@link #convertFunc} returned also unregisters its callback. A callback runs on the caller's
 * thread or on one of a session's worker threads, so it must be thread-safe; an exception it
 * throws fails the call with an {@link org.mote.CallbackException} carrying its text.
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

    private final org.mote.Function impl;
    private final boolean owner;
    private volatile boolean released;

    Function(org.mote.Function impl, boolean owner) {
        super(TypeIndex.kTVMFFIFunction);
        this.impl = impl;
        this.owner = owner;
    }

    org.mote.Function mote() {
        if (released) {
            throw new IllegalStateException("Function `" + impl.name() + "` is released");
        }
        return impl;
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
        return Convert.result(mote().invoke());
    }

    /**
     * Adds an integer argument.
     *
     * @param arg the value
     * @return this
     */
    public Function pushArg(int arg) {
        mote().pushArg((long) arg);
        return this;
    }

    /**
     * Adds an integer argument.
     *
     * @param arg the value
     * @return this
     */
    public Function pushArg(long arg) {
        mote().pushArg(arg);
        return this;
    }

    /**
     * Adds a float argument.
     *
     * @param arg the value
     * @return this
     */
    public Function pushArg(float arg) {
        mote().pushArg((double) arg);
        return this;
    }

    /**
     * Adds a float argument.
     *
     * @param arg the value
     * @return this
     */
    public Function pushArg(double arg) {
        mote().pushArg(arg);
        return this;
    }

    /**
     * Adds a string argument.
     *
     * @param arg the value
     * @return this
     */
    public Function pushArg(String arg) {
        mote().pushArg(arg);
        return this;
    }

    /**
     * Adds an array argument ({@link Tensor} or {@link NDArray}); a kernel may write it.
     *
     * @param arg the array
     * @return this
     */
    public Function pushArg(TensorBase arg) {
        mote().pushArg(arg.tensor);
        return this;
    }

    /**
     * A module argument: Mote cannot pass modules to functions.
     *
     * @param arg the module
     * @return never
     * @throws IllegalArgumentException always
     */
    public Function pushArg(Module arg) {
        Convert.toMote(arg, "pushArg(Module)");
        return this;
    }

    /**
     * Adds a function argument: a registered or converted function (not a function of a
     * {@link Module}, which Mote cannot pass).
     *
     * @param arg the function
     * @return this
     */
    public Function pushArg(Function arg) {
        mote().pushArg(arg.mote());
        return this;
    }

    /**
     * Adds a byte-string argument (copied when the call starts).
     *
     * @param arg the bytes
     * @return this
     */
    public Function pushArg(byte[] arg) {
        mote().pushArg(arg);
        return this;
    }

    /**
     * A device argument: Mote cannot pass devices to functions.
     *
     * @param arg the device
     * @return never
     * @throws IllegalArgumentException always
     */
    public Function pushArg(Device arg) {
        Convert.toMote(arg, "pushArg(Device)");
        return this;
    }

    /**
     * Calls the function with these arguments.
     *
     * @param args Integer, Long, Float, Double, Boolean, String, byte[], arrays, functions,
     *     {@link TVMValue}s of those, null
     * @return the result, as {@link #invoke()}
     * @throws IllegalArgumentException for an argument Mote cannot pass
     */
    public TVMValue call(Object... args) {
        return Convert.result(mote().call(Convert.toMote(args)));
    }

    /**
     * Ends this function object; for the function {@link #convertFunc} returned, also
     * unregisters the callback. A second call does nothing.
     */
    @Override
    public void release() {
        if (released) {
            return;
        }
        released = true;
        if (owner) {
            impl.release();
        }
    }

    /**
     * The function in Mote's idiomatic layer.
     *
     * @return the function
     * @throws IllegalStateException when this function is released
     */
    public org.mote.Function moteFunction() {
        return mote();
    }

    @Override
    public String toString() {
        return "Function(" + impl.name() + (released ? ", released" : "") + ")";
    }
}
