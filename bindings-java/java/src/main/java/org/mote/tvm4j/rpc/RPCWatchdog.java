package org.mote.tvm4j.rpc;

/**
 * tvm4j's session watchdog: a thread that, once {@link #startTimeout(int)} is called, calls
 * {@link #terminate()} (by default {@code System.exit(0)}, as tvm4j's apps expect) unless
 * {@link #finishTimeout()} comes first. Start the thread once and reuse it for every session.
 */
public class RPCWatchdog extends Thread {
    private long deadlineNanos;
    private boolean armed;

    /** A watchdog thread, not yet started. */
    public RPCWatchdog() {
        super("rpc-watchdog");
    }

    /**
     * Arms the watchdog.
     *
     * @param timeout milliseconds until {@link #terminate()}
     */
    public synchronized void startTimeout(int timeout) {
        deadlineNanos = System.nanoTime() + timeout * 1_000_000L;
        armed = true;
        notifyAll();
    }

    /** Disarms the watchdog. */
    public synchronized void finishTimeout() {
        armed = false;
        notifyAll();
    }

    @Override
    public void run() {
        while (true) {
            synchronized (this) {
                try {
                    while (!armed) {
                        wait();
                    }
                    long left = deadlineNanos - System.nanoTime();
                    if (left > 0) {
                        wait(left / 1_000_000L, (int) (left % 1_000_000L));
                        continue;
                    }
                    armed = false;
                } catch (InterruptedException e) {
                    return;
                }
            }
            terminate();
        }
    }

    /** What happens when a timeout passes: {@code System.exit(0)}. Override to do otherwise. */
    protected void terminate() {
        System.exit(0);
    }
}
