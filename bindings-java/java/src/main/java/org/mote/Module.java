package org.mote;

import java.util.List;

/**
 * tvm4j's {@code Module}: a loaded library whose functions are called through
 * {@link Function}. {@code Module.load("add_cpu.so").entryFunc().pushArg(a).pushArg(b)
 * .pushArg(res).invoke()} runs a kernel of a kernel-only library the way tvm4j does.
 *
 * <p><b>Threads.</b> A module may be shared by threads. Each call runs in a session of the
 * module's own, from a bounded pool: at most {@code maxSessions} sessions (default
 * {@link #DEFAULT_MAX_SESSIONS}) exist at once, each with its own worker threads and buffers.
 * A call takes an idle session or, while fewer than the bound exist, makes one; when all are
 * busy, <b>the caller waits</b> until another call returns one. Sessions are kept for reuse
 * until the module is closed. Two exceptions: a call from a thread that is already inside a
 * call of this module (a Java callback calling the module again) gets a session beyond the
 * bound, dropped after that call, instead of waiting for itself; and a callback running on one
 * of a session's worker threads that calls the same module may wait for a session like any
 * other caller, so such nested calls should use a {@link Session} of their own.
 *
 * <p><b>Interrupts.</b> A call ({@link Function#invoke()}, {@link Function#call}) stops when
 * its thread is interrupted ({@link Thread#interrupt()}): the session it runs in throws
 * {@link CancelledException} at its next VM call or backward jump, and the thread's interrupt status
 * stays set; a thread already interrupted gets it without running. Other threads' calls on
 * the module's other sessions go on, and an interrupt arriving after a call returned never
 * cancels a later call (of any thread) on that session. A thread waiting for a free session is
 * not woken by an interrupt, but its call is cancelled as soon as it gets one.
 */
public final class Module extends NativeObject {
    /** How many sessions a module has at most unless {@link #load(String, int)} says. */
    public static final int DEFAULT_MAX_SESSIONS = 4;

    private Module(long h) {
        super("Module", h, NativeBridge::moduleFree);
    }

    /**
     * Loads a library exported by TVM (a Relax model or a kernel-only library), with at most
     * {@link #DEFAULT_MAX_SESSIONS} sessions.
     *
     * @param path the library's path
     * @return the module
     * @throws LoadException when the file is not a loadable library
     * @throws MoteIoException when the file cannot be read
     */
    public static Module load(String path) {
        return load(path, DEFAULT_MAX_SESSIONS);
    }

    /**
     * Loads a library exported by TVM whose calls run in at most {@code maxSessions}
     * sessions at once (more concurrent callers wait; see the class comment).
     *
     * @param path the library's path
     * @param maxSessions the bound, at least 1
     * @return the module
     * @throws IllegalArgumentException when {@code maxSessions} is under 1
     * @throws LoadException when the file is not a loadable library
     * @throws MoteIoException when the file cannot be read
     */
    public static Module load(String path, int maxSessions) {
        if (maxSessions < 1) {
            throw new IllegalArgumentException("maxSessions " + maxSessions + " is not at least 1");
        }
        return load(path, maxSessions, new LoadOptions(), new SessionOptions());
    }

    /**
     * Loads a library or a code-free model file with load options, whose calls run in at most
     * {@code maxSessions} sessions made with {@code sessionOptions} (threads, backends,
     * plug-ins, budgets; profiling does not apply: a module has no profile).
     *
     * @param path the file's path
     * @param maxSessions the bound, at least 1
     * @param loadOptions how to load the file ({@link LoadOptions#codeFree}...)
     * @param sessionOptions what each session of the pool is made with
     * @return the module
     * @throws IllegalArgumentException when {@code maxSessions} is under 1
     * @throws LoadException when the file is not a loadable library
     * @throws MoteIoException when the file cannot be read
     * @throws ResourceExhaustedException when a code-free load would exceed its memory budget
     * @throws InvalidArgumentException for bad options ({@link LoadOptions#readIntoMemory}
     *     without {@link LoadOptions#codeFree}, a bad thread count)
     */
    public static Module load(String path, int maxSessions, LoadOptions loadOptions, SessionOptions sessionOptions) {
        if (maxSessions < 1) {
            throw new IllegalArgumentException("maxSessions " + maxSessions + " is not at least 1");
        }
        for (String p : sessionOptions.plugins) {
            NativeBridge.loadPlugin(p);
        }
        return new Module(NativeBridge.moduleLoad(path, maxSessions, loadOptions.codeFree, loadOptions.readIntoMemory,
                loadOptions.memoryBudgetBytes, sessionOptions.threads, Model.join(",", sessionOptions.backends),
                sessionOptions.poisonMemory, sessionOptions.budgets.clone(), sessionOptions.openclDevice,
                sessionOptions.openclProfiling, sessionOptions.openclProgramCache));
    }

    /**
     * The functions of the module.
     *
     * @return their names
     */
    public List<String> functionNames() {
        long h = handle.acquire();
        try {
            return Model.lines(NativeBridge.moduleFunctionNames(h));
        } finally {
            handle.release();
        }
    }

    /**
     * A function of the module.
     *
     * @param name the function's name
     * @return the function
     * @throws UnknownFunctionException when the module has no such function
     */
    public Function getFunction(String name) {
        List<String> names = functionNames();
        if (!names.contains(name)) {
            throw new UnknownFunctionException("no function named `" + name + "` in the module (available: "
                    + Model.join(", ", names) + ")");
        }
        return new Function(this, name);
    }

    /**
     * The entry function: {@code main} (TVM's alias for the only kernel of a one-kernel
     * library), else the only function.
     *
     * @return the function
     * @throws UnknownFunctionException when there is no single entry
     */
    public Function entryFunc() {
        List<String> names = functionNames();
        if (names.contains("main")) {
            return new Function(this, "main");
        }
        if (names.size() == 1) {
            return new Function(this, names.get(0));
        }
        throw new UnknownFunctionException("the module has no entry function (no `main`, and "
                + names.size() + " functions: " + Model.join(", ", names) + ")");
    }

    /** Frees the module (tvm4j's name for {@link #close()}). */
    public void release() {
        close();
    }

    Object call(String name, Args a) {
        long h = handle.acquire();
        try {
            return Values.take(Interruptor.call(
                    t -> NativeBridge.moduleCall(h, t, name, a.tags, a.longs, a.doubles, a.strs)), true);
        } finally {
            handle.release();
        }
    }
}
