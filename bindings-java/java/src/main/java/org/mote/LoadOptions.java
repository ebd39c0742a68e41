package org.mote;

/**
 * Options for {@link Model#load(String, LoadOptions)} and
 * {@link Module#load(String, int, LoadOptions, SessionOptions)}; a builder, each setter
 * returns it. The defaults load the file as a library (its code runs, see
 * {@link Model#load(String)}).
 *
 * <p><b>Threads.</b> Not synchronized: build it on one thread, then pass it anywhere (loads
 * copy what they need).
 */
public final class LoadOptions {
    boolean codeFree;
    boolean readIntoMemory;
    /** 0: the default budget. */
    long memoryBudgetBytes;

    /** Default options: a library load, no budget of its own. */
    public LoadOptions() {}

    /**
     * Load the file as data: nothing in it is mapped as code or run, only its module blob is
     * read and validated (see {@code docs/code-free.md} and {@link Model#load(String,
     * boolean)}).
     *
     * @param on whether to load code-free
     * @return this
     */
    public LoadOptions codeFree(boolean on) {
        this.codeFree = on;
        return this;
    }

    /**
     * For a code-free load: read the whole file into memory instead of mapping it, so nothing
     * done to the file later (truncated or rewritten in place by whoever controls it) can fault
     * the process; every weight is then copied. Use it for files the app does not control. A
     * load that is not code-free refuses it ({@link InvalidArgumentException}).
     *
     * @param on whether to read the file instead of mapping it
     * @return this
     */
    public LoadOptions readIntoMemory(boolean on) {
        this.readIntoMemory = on;
        return this;
    }

    /**
     * The most memory a code-free load may allocate to decode the file (a gzip-compressed
     * {@code .tar} is inflated only up to it; one that would inflate further is a
     * {@link ResourceExhaustedException}). Default: 16 times the file's size plus 64 MiB, at
     * most 4 GiB. A load that is not code-free runs the file's code, so no budget applies.
     *
     * @param bytes the budget, positive
     * @return this
     * @throws InvalidArgumentException when {@code bytes} is not positive
     */
    public LoadOptions memoryBudgetBytes(long bytes) {
        this.memoryBudgetBytes = SessionOptions.positive("memoryBudgetBytes", bytes);
        return this;
    }
}
