package org.mote;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

/**
 * tvm4j's {@code Function}: a function of a {@link Module}, or a global function registered
 * with Mote (by name), called with {@code pushArg(...)...invoke()} or {@link #call}.
 *
 * <p>Java code becomes a function models and kernels can call by name with
 * {@link #register(String, Callback)}; {@link #convertFunc(Callback)} does the same under a
 * fresh name. Mote may run a callback on the caller's thread or on one of a session's worker
 * threads (attached to the JVM for it); a callback must therefore be thread-safe. An
 * exception it throws fails the Mote call with a {@link CallbackException} (or a
 * {@link KernelException} when a compiled kernel called it) whose message contains the
 * exception's text.
 *
 * <p><b>Threads.</b> {@code pushArg} collects arguments in the object, so one Function object
 * is for one thread at a time; {@link #call} takes them at once and may be used from several
 * threads.
 */
public final class Function implements AutoCloseable {
    /**
     * A Java function Mote can call.
     */
    public interface Callback {
        /**
         * Runs the function. Arguments are null, Long, Double, Boolean, String, NDArray (a copy,
         * closed after the callback returns: copy the data to keep it), {@link Pointer},
         * byte[] (a copy) or a {@link Function} (a registered function, by name).
         *
         * @param args the arguments
         * @return null, a number, a boolean, a String, a byte[], a Tensor or a registered
         *     {@link Function} (not a function of a {@link Module})
         */
        Object invoke(Object... args);
    }

    private static final Map<Long, Callback> CALLBACKS = new ConcurrentHashMap<>();
    private static final Map<String, Long> IDS = new ConcurrentHashMap<>();
    private static final AtomicLong NEXT_ID = new AtomicLong(1);
    private static final Object REGISTRY = new Object();

    private final Module module;
    private final String name;
    private final List<Object> pending = new ArrayList<>();
    private final boolean owned;

    Function(Module module, String name) {
        this(module, name, false);
    }

    private Function(Module module, String name, boolean owned) {
        this.module = module;
        this.name = name;
        this.owned = owned;
    }

    /**
     * The function's name.
     *
     * @return the name
     */
    public String name() {
        return name;
    }

    /** A registered function, by name, as a call's result or a callback's argument. */
    static Function named(String name) {
        return new Function(null, name, false);
    }

    /**
     * The global name this function is passed by, as an argument or a return value.
     *
     * @param what how the value is named in the error
     * @throws IllegalArgumentException for a function of a {@link Module}, which has none
     */
    String globalName(String what) {
        if (module != null) {
            throw new IllegalArgumentException(what + ": the function `" + name
                    + "` of a Module cannot be passed as a value (only registered functions can)");
        }
        return name;
    }

    /**
     * Registers {@code callback} as the global function {@code name} (replacing any function
     * of that name), so models and kernels calling {@code name} run it.
     *
     * @param name the global name (e.g. {@code "mote.zoo.scale_shift"})
     * @param callback the Java code
     */
    public static void register(String name, Callback callback) {
        java.util.Objects.requireNonNull(callback, "callback");
        registerAs(name, NEXT_ID.getAndIncrement(), callback);
    }

    /**
     * Registers {@code callback} under {@code name} with the callback id {@code id}. One lock
     * around the Java maps and the native registry, so two threads registering one name
     * cannot leave the native function pointing at an id whose callback was removed.
     */
    private static void registerAs(String name, long id, Callback callback) {
        synchronized (REGISTRY) {
            CALLBACKS.put(id, callback);
            try {
                NativeBridge.registerFunction(name, id);
            } catch (RuntimeException | Error e) {
                CALLBACKS.remove(id);
                throw e;
            }
            Long old = IDS.put(name, id);
            if (old != null) {
                CALLBACKS.remove(old);
            }
        }
    }

    /**
     * Removes the global function {@code name}.
     *
     * @param name the global name
     * @return whether it was registered
     */
    public static boolean unregister(String name) {
        synchronized (REGISTRY) {
            Long old = IDS.remove(name);
            if (old != null) {
                CALLBACKS.remove(old);
            }
            return NativeBridge.unregisterFunction(name);
        }
    }

    /**
     * Makes {@code callback} a Mote function under a fresh global name ({@link #name()});
     * {@link #release()} unregisters it. The name is made from the callback's own id, so it
     * is unique even when many threads convert functions at once.
     *
     * @param callback the Java code
     * @return the function
     */
    public static Function convertFunc(Callback callback) {
        java.util.Objects.requireNonNull(callback, "callback");
        long id = NEXT_ID.getAndIncrement();
        String name = "org.mote.callback." + id;
        registerAs(name, id, callback);
        return new Function(null, name, true);
    }

    /**
     * A global function by name (registered from Java or from native code).
     *
     * @param name the global name
     * @return the function, or null when none is registered under that name
     */
    public static Function getFunction(String name) {
        if (!NativeBridge.functionExists(name)) {
            return null;
        }
        return new Function(null, name, false);
    }

    /**
     * Adds an argument for {@link #invoke()}.
     *
     * @param arg a Tensor/NDArray
     * @return this
     */
    public Function pushArg(Tensor arg) {
        pending.add(arg);
        return this;
    }

    /**
     * Adds an integer argument.
     *
     * @param arg the value
     * @return this
     */
    public Function pushArg(long arg) {
        pending.add(arg);
        return this;
    }

    /**
     * Adds an integer argument.
     *
     * @param arg the value
     * @return this
     */
    public Function pushArg(int arg) {
        pending.add((long) arg);
        return this;
    }

    /**
     * Adds a float argument.
     *
     * @param arg the value
     * @return this
     */
    public Function pushArg(double arg) {
        pending.add(arg);
        return this;
    }

    /**
     * Adds a float argument.
     *
     * @param arg the value
     * @return this
     */
    public Function pushArg(float arg) {
        pending.add((double) arg);
        return this;
    }

    /**
     * Adds a boolean argument.
     *
     * @param arg the value
     * @return this
     */
    public Function pushArg(boolean arg) {
        pending.add(arg);
        return this;
    }

    /**
     * Adds a string argument.
     *
     * @param arg the value
     * @return this
     */
    public Function pushArg(String arg) {
        pending.add(arg);
        return this;
    }

    /**
     * Adds a byte-string argument (copied when the call starts; a callback gets a byte[]).
     *
     * @param arg the bytes
     * @return this
     */
    public Function pushArg(byte[] arg) {
        pending.add(arg);
        return this;
    }

    /**
     * Adds a registered function as an argument (by its global name; a function of a
     * {@link Module} cannot be passed).
     *
     * @param arg the function
     * @return this
     */
    public Function pushArg(Function arg) {
        pending.add(arg);
        return this;
    }

    /**
     * Calls the function with the pushed arguments (then forgets them).
     *
     * @return the result: null (kernels return nothing: their outputs are the tensors
     *     passed), Long, Double, Boolean, String, byte[], NDArray, Function (a registered
     *     function), Object[] (a tuple)...
     */
    public Object invoke() {
        List<Object> args = new ArrayList<>(pending);
        pending.clear();
        return invokeWith(args);
    }

    /**
     * Calls the function with these arguments.
     *
     * @param args null, numbers, booleans, Strings, byte[]s, Tensors, registered Functions
     * @return as {@link #invoke()}
     */
    public Object call(Object... args) {
        return invokeWith(Arrays.asList(args));
    }

    private Object invokeWith(List<Object> args) {
        Args a = new Args(args);
        try {
            if (module != null) {
                return module.call(name, a);
            }
            return Values.take(NativeBridge.globalCall(name, a.tags, a.longs, a.doubles, a.strs), true);
        } finally {
            a.release();
        }
    }

    /** Unregisters a function made by {@link #convertFunc}; otherwise does nothing. */
    public void release() {
        if (owned) {
            unregister(name);
        }
    }

    /** Same as {@link #release()}. */
    @Override
    public void close() {
        release();
    }

    /** Called by native code: runs callback {@code id}; returns a value handle (0 = None). */
    static long dispatch(long id, int[] tags, long[] longs, double[] doubles, String[] strs) {
        Object[] args = new Object[tags.length];
        List<Tensor> made = new ArrayList<>();
        for (int i = 0; i < tags.length; i++) {
            if (tags[i] == NativeBridge.TAG_TENSOR || tags[i] == NativeBridge.TAG_BYTES) {
                NDArray t = new NDArray(longs[i]);
                made.add(t);
                args[i] = t;
            }
        }
        try {
            for (int i = 0; i < tags.length; i++) {
                switch (tags[i]) {
                    case NativeBridge.TAG_NONE: args[i] = null; break;
                    case NativeBridge.TAG_INT: args[i] = longs[i]; break;
                    case NativeBridge.TAG_FLOAT: args[i] = doubles[i]; break;
                    case NativeBridge.TAG_BOOL: args[i] = longs[i] != 0; break;
                    case NativeBridge.TAG_STR:
                    case NativeBridge.TAG_DTYPE: args[i] = strs[i]; break;
                    case NativeBridge.TAG_POINTER: args[i] = new Pointer(longs[i]); break;
                    case NativeBridge.TAG_FUNCTION: args[i] = named(strs[i]); break;
                    case NativeBridge.TAG_TENSOR: break;
                    case NativeBridge.TAG_BYTES: args[i] = ((Tensor) args[i]).toRawBytes(); break;
                    default:
                        throw new UnsupportedException("argument " + i + " cannot be passed to Java");
                }
            }
            Callback cb = CALLBACKS.get(id);
            if (cb == null) {
                throw new IllegalStateException("callback " + id + " is no longer registered");
            }
            return encode(cb.invoke(args));
        } finally {
            for (Tensor t : made) {
                t.close();
            }
        }
    }

    private static long encode(Object r) {
        if (r == null) {
            return 0;
        }
        if (r instanceof Tensor) {
            Tensor t = (Tensor) r;
            long h = t.acquireHandle();
            try {
                return NativeBridge.valueFrom(NativeBridge.TAG_TENSOR, h, 0, null);
            } finally {
                t.releaseHandle();
            }
        }
        Args a = new Args(java.util.Collections.singletonList(r), "the callback's return value");
        try {
            return NativeBridge.valueFrom(a.tags[0], a.longs[0], a.doubles[0], a.strs[0]);
        } finally {
            a.release();
        }
    }
}
