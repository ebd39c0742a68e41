package org.mote;

import java.lang.ref.PhantomReference;
import java.lang.ref.ReferenceQueue;
import java.util.Collections;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.logging.Level;
import java.util.logging.Logger;

/**
 * Runs an action once for an object that became unreachable without being closed: what
 * {@code java.lang.ref.Cleaner} does, built from {@link PhantomReference} and
 * {@link ReferenceQueue} because Android has {@code Cleaner} only from API 33 (this works from
 * API 24). A daemon thread, {@code mote-backstop}, waits on the queue; {@link #register} also
 * drains whatever is already queued, so actions run even if that thread could not start.
 *
 * <p>An action runs at most once, whichever comes first: {@link Entry#clean()} (from
 * {@code close()}) or the garbage collector finding the object unreachable. The action must
 * not refer to the object, or it would stay reachable forever.
 */
final class Backstop {
    private Backstop() {}

    private static final Logger LOG = Logger.getLogger("org.mote");
    private static final ReferenceQueue<Object> QUEUE = new ReferenceQueue<>();
    /** Keeps every registered entry reachable until it has run (a collected reference is never queued). */
    private static final Set<Entry> PENDING = Collections.newSetFromMap(new ConcurrentHashMap<Entry, Boolean>());

    static {
        try {
            Thread t = new Thread(Backstop::drainForever, "mote-backstop");
            t.setDaemon(true);
            t.start();
        } catch (RuntimeException | Error e) {
            LOG.log(Level.WARNING, "mote: no backstop thread; unclosed objects are freed on later allocations", e);
        }
    }

    /** One registration; {@link #clean()} runs its action now unless it ran already. */
    static final class Entry extends PhantomReference<Object> {
        private final Runnable action;

        private Entry(Object owner, Runnable action) {
            super(owner, QUEUE);
            this.action = action;
        }

        /** Runs the action if nobody has yet; later calls (and the GC's turn) do nothing. */
        void clean() {
            if (PENDING.remove(this)) {
                clear();
                action.run();
            }
        }
    }

    /**
     * Runs {@code action} once {@code owner} is unreachable, unless the returned entry's
     * {@link Entry#clean()} runs it first.
     *
     * @param owner the object to watch
     * @param action what frees its native memory; must not refer to {@code owner}
     * @return the entry
     */
    static Entry register(Object owner, Runnable action) {
        drainQueued();
        Entry e = new Entry(owner, action);
        PENDING.add(e);
        return e;
    }

    private static void drainQueued() {
        for (java.lang.ref.Reference<?> r = QUEUE.poll(); r != null; r = QUEUE.poll()) {
            run(r);
        }
    }

    private static void drainForever() {
        while (true) {
            try {
                run(QUEUE.remove());
            } catch (InterruptedException e) {
                // Daemon thread: nobody interrupts it on purpose; keep draining.
            }
        }
    }

    private static void run(java.lang.ref.Reference<?> r) {
        try {
            ((Entry) r).clean();
        } catch (RuntimeException | Error e) {
            LOG.log(Level.WARNING, "mote: freeing an unclosed object failed", e);
        }
    }
}
