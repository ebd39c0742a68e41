package org.mote;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;

/**
 * Options for {@link Model#newSession(SessionOptions)}; a builder, each setter returns it.
 *
 * <p><b>Threads.</b> Not synchronized: build it on one thread, then pass it anywhere (sessions
 * copy what they need).
 */
public final class SessionOptions {
    int threads;
    final List<String> backends = new ArrayList<>();
    final List<String> plugins = new ArrayList<>();
    boolean poisonMemory;
    boolean profiling;
    /** {memoryBudgetBytes, maxRegisters, stackBudgetBytes, maxInstructions}; 0: the default. */
    final long[] budgets = new long[4];
    /** -1: the default OpenCL device. */
    int openclDevice = -1;
    boolean openclProfiling;
    /** null: no program cache. */
    String openclProgramCache;

    /** Default options: all CPUs, every backend available, no profiling, default budgets. */
    public SessionOptions() {}

    /**
     * Threads kernels may use (the calling thread counts as one). 0 (the default): the
     * number of CPUs, or {@code MOTE_NUM_THREADS}/{@code TVM_NUM_THREADS} when set.
     *
     * @param threads 0 or a count from 1 to 1024
     * @return this
     */
    public SessionOptions threads(int threads) {
        this.threads = threads;
        return this;
    }

    /**
     * Backends that may run offloaded subgraphs, in order of preference ({@code "acl"},
     * {@code "bnns"}, {@code "cpu"}, or a plug-in's name). None: every available backend.
     *
     * @param names backend names
     * @return this
     */
    public SessionOptions backends(String... names) {
        backends.clear();
        backends.addAll(Arrays.asList(names));
        return this;
    }

    /**
     * Backend plug-ins (shared libraries) to load before the session is made. Loading
     * registers the plug-in for the whole process, under its own name.
     *
     * @param paths plug-in library paths
     * @return this
     */
    public SessionOptions plugins(String... paths) {
        plugins.clear();
        plugins.addAll(Arrays.asList(paths));
        return this;
    }

    /**
     * Fill every intermediate buffer with NaN (or 0xA5 bytes) before use: for tests, so a
     * kernel that skips work shows in the outputs.
     *
     * @param on whether to poison
     * @return this
     */
    public SessionOptions poisonMemory(boolean on) {
        this.poisonMemory = on;
        return this;
    }

    /**
     * Time every kernel and builtin call, for {@link Session#profile()}.
     *
     * @param on whether to profile
     * @return this
     */
    public SessionOptions profiling(boolean on) {
        this.profiling = on;
        return this;
    }

    /**
     * The most bytes of storage one call may hold at once (intermediate buffers, outputs still
     * held, an offloaded region's scratch memory); over it, the call throws
     * {@link ResourceExhaustedException} instead of asking the system for more. Default: half
     * the physical memory.
     *
     * @param bytes the budget, positive
     * @return this
     * @throws InvalidArgumentException when {@code bytes} is not positive
     */
    public SessionOptions memoryBudgetBytes(long bytes) {
        budgets[0] = positive("memoryBudgetBytes", bytes);
        return this;
    }

    /**
     * The most VM registers all frames of one call may hold together; over it (deep or
     * endless recursion), the call throws {@link ResourceExhaustedException}. Default 2^20.
     *
     * @param count the budget, positive
     * @return this
     * @throws InvalidArgumentException when {@code count} is not positive
     */
    public SessionOptions maxRegisters(long count) {
        budgets[1] = positive("maxRegisters", count);
        return this;
    }

    /**
     * Bytes of the calling thread's stack that nested Relax calls may use; a deeper call throws
     * {@link ResourceExhaustedException} before it can overflow. Default 256 KiB.
     *
     * @param bytes the budget, positive
     * @return this
     * @throws InvalidArgumentException when {@code bytes} is not positive
     */
    public SessionOptions stackBudgetBytes(long bytes) {
        budgets[2] = positive("stackBudgetBytes", bytes);
        return this;
    }

    /**
     * The most VM instructions one call may execute (a kernel counts one however long it
     * runs); a call that would run more (a loop that does not end) throws
     * {@link ResourceExhaustedException}. Default 2^28.
     *
     * @param count the budget, positive
     * @return this
     * @throws InvalidArgumentException when {@code count} is not positive
     */
    public SessionOptions maxInstructions(long count) {
        budgets[3] = positive("maxInstructions", count);
        return this;
    }

    /**
     * The OpenCL device a model compiled for OpenCL runs on: an index into the devices OpenCL
     * lists, in order. Default: the first GPU, else the first device. An index past the list
     * makes {@link Model#newSession(SessionOptions)} throw {@link InvalidArgumentException};
     * no OpenCL library or no device is {@link DeviceException}. Ignored for models without
     * OpenCL code.
     *
     * @param index the device index, 0 or more
     * @return this
     * @throws InvalidArgumentException when {@code index} is negative
     */
    public SessionOptions openclDevice(int index) {
        if (index < 0) {
            throw new InvalidArgumentException("openclDevice " + index + " is negative");
        }
        this.openclDevice = index;
        return this;
    }

    /**
     * Time each OpenCL kernel launch of the session's calls (OpenCL profiling events). Default
     * off. Ignored for models without OpenCL code.
     *
     * @param on whether to time launches
     * @return this
     */
    public SessionOptions openclProfiling(boolean on) {
        this.openclProfiling = on;
        return this;
    }

    /**
     * A directory of the app's own (what is in it is loaded into the OpenCL driver) where
     * compiled OpenCL programs are kept, so that loading the same model again skips the
     * compiler. Default (null): no cache, every load compiles.
     *
     * @param dir the directory, or null for none
     * @return this
     * @throws InvalidArgumentException when {@code dir} is empty
     */
    public SessionOptions openclProgramCache(String dir) {
        if (dir != null && dir.isEmpty()) {
            throw new InvalidArgumentException("openclProgramCache is empty");
        }
        this.openclProgramCache = dir;
        return this;
    }

    /** {@code v} when positive, else {@link InvalidArgumentException} naming {@code what}. */
    static long positive(String what, long v) {
        if (v <= 0) {
            throw new InvalidArgumentException(what + " " + v + " is not positive");
        }
        return v;
    }

    /**
     * The backend preference set with {@link #backends}.
     *
     * @return an unmodifiable list
     */
    public List<String> backendList() {
        return Collections.unmodifiableList(backends);
    }
}
