package org.mote.rpc;

import java.lang.ref.PhantomReference;
import java.lang.ref.Reference;
import java.lang.ref.ReferenceQueue;
import java.util.Collections;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.LongConsumer;
import java.util.logging.Level;
import java.util.logging.Logger;

/**
 * The one owner of a native handle of the RPC client (a session, a remote function or module).
 * Every native call using the handle runs between {@link #acquire()} and {@link #release()};
 * {@link #close()} (from the owner's {@code close()}) or the garbage collector finding the owner
 * unreachable marks it closed, and it is freed once, when no call uses it any more. So a native
 * object is never freed while a call on another thread still reads it, and nothing is freed
 * twice.
 *
 * <p>The collector's part is a phantom reference drained by a daemon thread,
 * {@code mote-rpc-backstop} ({@code java.lang.ref.Cleaner} is Android API 33 and later; this
 * works from API 24). Freeing a remote function or module sends a request to the server, so the
 * thread may wait for a request of that session in progress.
 */
final class NativeHandle {
    private static final Logger LOG = Logger.getLogger("org.mote.rpc");
    private static final ReferenceQueue<Object> QUEUE = new ReferenceQueue<>();
    /** Keeps the watches reachable until they ran (a collected reference is never queued). */
    private static final Set<Watch> PENDING =
            Collections.newSetFromMap(new ConcurrentHashMap<Watch, Boolean>());

    static {
        try {
            Thread t = new Thread(NativeHandle::drainForever, "mote-rpc-backstop");
            t.setDaemon(true);
            t.start();
        } catch (RuntimeException | Error e) {
            LOG.log(Level.WARNING, "mote: no RPC backstop thread; unclosed remote objects are"
                    + " freed when later ones are made", e);
        }
    }

    /** Closes its handle when the owner became unreachable; refers to the handle, not the owner. */
    private static final class Watch extends PhantomReference<Object> {
        private final NativeHandle handle;

        Watch(Object owner, NativeHandle handle) {
            super(owner, QUEUE);
            this.handle = handle;
        }

        void run() {
            if (PENDING.remove(this)) {
                clear();
                handle.markClosed();
            }
        }
    }

    private final String what;
    private final LongConsumer free;
    private final Watch watch;
    private long handle;
    private int inFlight;
    private boolean closed;

    /**
     * Owns {@code handle} for {@code owner}.
     *
     * @param owner the Java object the handle belongs to (watched, not kept reachable)
     * @param what its name in errors ("RemoteSession"...)
     * @param handle the native handle, not 0
     * @param free frees it (called once)
     */
    NativeHandle(Object owner, String what, long handle, LongConsumer free) {
        this.what = what;
        this.handle = handle;
        this.free = free;
        drainQueued();
        this.watch = new Watch(owner, this);
        PENDING.add(watch);
    }

    /**
     * The handle, for one native call; {@link #release()} must follow.
     *
     * @throws IllegalStateException when closed
     */
    synchronized long acquire() {
        if (closed) {
            throw new IllegalStateException(what + " is closed");
        }
        inFlight++;
        return handle;
    }

    /** Ends a call that {@link #acquire()} started; frees the handle if it was the last of a closed one. */
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

    /** Closes it (frees it now, or when the last call using it returns); later calls do nothing. */
    void close() {
        watch.run();
    }

    private void markClosed() {
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

    private static void drainQueued() {
        for (Reference<?> r = QUEUE.poll(); r != null; r = QUEUE.poll()) {
            runSafely(r);
        }
    }

    private static void drainForever() {
        while (true) {
            try {
                runSafely(QUEUE.remove());
            } catch (InterruptedException e) {
                // A daemon thread nobody interrupts on purpose: keep draining.
            }
        }
    }

    private static void runSafely(Reference<?> r) {
        try {
            ((Watch) r).run();
        } catch (RuntimeException | Error e) {
            LOG.log(Level.WARNING, "mote: freeing an unclosed remote object failed", e);
        }
    }
}
