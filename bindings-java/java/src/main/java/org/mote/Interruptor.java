package org.mote;

import java.io.IOException;
import java.nio.channels.spi.AbstractInterruptibleChannel;

/**
 * Makes a model call stop when its thread is interrupted ({@link Thread#interrupt()}): the
 * call throws {@link CancelledException} at its next VM call or backward jump and the thread's
 * interrupt status stays set, as for an interrupted blocking channel operation. A thread
 * already interrupted when the call starts gets {@link CancelledException} without the call
 * running.
 *
 * <p>How: one instance per call is an {@link AbstractInterruptibleChannel} that is never
 * opened for I/O. Its {@code begin()} registers it with the thread (public API since Android
 * API 1), so {@code Thread.interrupt()} closes it, and {@link #implCloseChannel} then
 * interrupts the native call through its token (bindings-java/src/cancel.rs: armed with the
 * interrupt handle of the session the call runs in, for a {@link Module} the one it checked out
 * of its pool; disarmed, and a late interrupt dropped, when the call returns, so a later call
 * is never cancelled by it). {@code end()} unregisters it; the token is freed after, under the
 * lock {@link #implCloseChannel} takes, so a late close never touches a freed token.
 *
 * <p>A call made from a callback of a call on the same thread (nested) reuses the outer call's
 * token instead of registering a second channel (a thread has one such registration at a time,
 * and the inner {@code end()} would drop the outer's).
 */
final class Interruptor extends AbstractInterruptibleChannel {
    /** The interruptible call running on this thread, for nested calls. */
    private static final ThreadLocal<Interruptor> CURRENT = new ThreadLocal<>();

    /** A native call given the handle of its token. */
    interface NativeCall {
        /**
         * Runs the native call.
         *
         * @param token the call token's handle
         * @return what the native call returns
         */
        long run(long token);
    }

    /** The native token; 0 once freed. Guarded by {@code this}. */
    private long token;

    private Interruptor() {
        token = NativeBridge.tokenNew();
    }

    /**
     * Runs {@code call} so that interrupting this thread cancels it.
     *
     * @param call the native call
     * @return its result
     */
    static long call(NativeCall call) {
        Interruptor outer = CURRENT.get();
        if (outer != null) {
            // Only the outer call's own thread (this one) frees its token, after it returns.
            return call.run(outer.token);
        }
        Interruptor in = new Interruptor();
        CURRENT.set(in);
        try {
            in.begin();
            boolean completed = false;
            try {
                long r = call.run(in.token);
                completed = true;
                return r;
            } finally {
                try {
                    in.end(completed);
                } catch (IOException e) {
                    // ClosedByInterruptException: the thread was interrupted. The native call
                    // decided the outcome (CancelledException, or a result when the interrupt
                    // came too late to stop it); the interrupt status stays set either way.
                }
            }
        } finally {
            CURRENT.remove();
            in.free();
        }
    }

    private synchronized void free() {
        long t = token;
        token = 0;
        NativeBridge.tokenFree(t);
    }

    /** Called by {@code Thread.interrupt()} (through {@code close()}): cancel the call. */
    @Override
    protected synchronized void implCloseChannel() {
        if (token != 0) {
            NativeBridge.tokenInterrupt(token);
        }
    }
}
