package org.mote;

import java.util.function.LongConsumer;

/**
 * The one owner of a native handle. Calls {@link #acquire()} the handle before using it and
 * {@link #release()} it after; {@link #run()} (from {@code close()} or the {@link Backstop})
 * marks it closed and frees it once no call is using it, so a handle is freed exactly once and
 * never while a native call on another thread still reads it.
 */
final class Handle implements Runnable {
    private final String what;
    private final LongConsumer free;
    private long handle;
    private int inFlight;
    private boolean closed;

    Handle(String what, long handle, LongConsumer free) {
        this.what = what;
        this.handle = handle;
        this.free = free;
    }

    synchronized long acquire() {
        if (closed) {
            throw new IllegalStateException(what + " is closed");
        }
        inFlight++;
        return handle;
    }

    void release() {
        long toFree = 0;
        synchronized (this) {
            inFlight--;
            if (closed && inFlight == 0) {
                toFree = handle;
                handle = 0;
            }
        }
        if (toFree != 0) {
            free.accept(toFree);
        }
    }

    synchronized boolean isClosed() {
        return closed;
    }

    @Override
    public void run() {
        long toFree = 0;
        synchronized (this) {
            if (closed) {
                return;
            }
            closed = true;
            if (inFlight == 0) {
                toFree = handle;
                handle = 0;
            }
        }
        if (toFree != 0) {
            free.accept(toFree);
        }
    }
}
