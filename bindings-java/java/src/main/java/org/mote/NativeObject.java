package org.mote;

/**
 * A Java object that owns one native Mote object. {@link #close()} frees it (a second call does
 * nothing; calls from several threads free it once); any other method of a closed object throws
 * {@link IllegalStateException}. An object that is never closed is freed after it becomes
 * unreachable, by a phantom reference drained on a daemon thread ({@code mote-backstop}; not
 * {@code java.lang.ref.Cleaner}, which Android lacks before API 33): a backstop, not the plan,
 * since native memory is invisible to the garbage collector's heuristics.
 */
public abstract class NativeObject implements AutoCloseable {
    final Handle handle;
    private final Backstop.Entry backstop;

    NativeObject(String what, long h, java.util.function.LongConsumer free) {
        this.handle = new Handle(what, h, free);
        this.backstop = Backstop.register(this, handle);
    }

    /** Frees the native object; later calls of {@code close()} do nothing. */
    @Override
    public void close() {
        backstop.clean();
    }

    /**
     * Whether {@link #close()} was called.
     *
     * @return true once closed
     */
    public boolean isClosed() {
        return handle.isClosed();
    }
}
