package org.mote;

import java.lang.ref.Cleaner;

/**
 * A Java object that owns one native Mote object. {@link #close()} frees it (a second call does
 * nothing); any other method of a closed object throws {@link IllegalStateException}. An object
 * that is never closed is freed by a {@link Cleaner} after it becomes unreachable: a backstop,
 * not the plan, since native memory is invisible to the garbage collector's heuristics.
 */
public abstract class NativeObject implements AutoCloseable {
    final Handle handle;
    private final Cleaner.Cleanable cleanable;

    NativeObject(String what, long h, java.util.function.LongConsumer free) {
        this.handle = new Handle(what, h, free);
        this.cleanable = Handle.CLEANER.register(this, handle);
    }

    /** Frees the native object; later calls of {@code close()} do nothing. */
    @Override
    public void close() {
        cleanable.clean();
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
