package org.mote;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@link Thread#interrupt()} cancels a running model call ({@link CancelledException}, the
 * interrupt status kept), an already-interrupted thread's call does not run, and an interrupt
 * never cancels a call it was not sent to (bindings-java/src/cancel.rs).
 */
class InterruptTest {
    @TempDir
    static Path dir;

    static String endless;
    static String counted;

    /**
     * Instructions a call may run here: long enough to be interrupted 50 ms in (about a second
     * for the endless loop, charged two instructions a turn, on a loaded 2-core machine).
     */
    static final long LONG_RUN = 1L << 27;

    @BeforeAll
    static void write() {
        endless = BudgetsTest.craft(dir, "endless_loop");
        counted = BudgetsTest.craft(dir, "counted_loop");
        TestHooks.registerTestArithmetic();
    }

    @AfterEach
    void clearStatus() {
        Thread.interrupted();
    }

    static SessionOptions longRun() {
        return new SessionOptions().threads(1).maxInstructions(LONG_RUN);
    }

    /** What a call on another thread did: its exception (null: it returned), time, status. */
    static final class Outcome {
        volatile Throwable thrown;
        volatile long nanos;
        volatile boolean interruptedAfter;
    }

    static Thread start(Runnable call, Outcome o) {
        Thread t = new Thread(() -> {
            long t0 = System.nanoTime();
            try {
                call.run();
            } catch (Throwable e) {
                o.thrown = e;
            }
            o.nanos = System.nanoTime() - t0;
            o.interruptedAfter = Thread.currentThread().isInterrupted();
        }, "interrupt-test");
        t.start();
        return t;
    }

    /**
     * (b) Interrupting a thread 50 ms into an endless loop on a Module stops it with
     * CancelledException at once, the thread still interrupted; the module's next call (same
     * session: a pool of one) runs to its budget, not cancelled.
     */
    @Test
    void interruptCancelsAModuleCall() throws Exception {
        Module mod = Module.load(endless, 1, BudgetsTest.codeFree(), longRun());
        try {
            Function main = mod.getFunction("main");
            // How long the budget takes here, uninterrupted.
            long t0 = System.nanoTime();
            assertThrows(ResourceExhaustedException.class, main::invoke);
            long full = System.nanoTime() - t0;
            assertTrue(full > 300_000_000L, "the budget must outlast the interrupt: " + full / 1_000_000 + " ms");

            Outcome o = new Outcome();
            Thread t = start(main::invoke, o);
            Thread.sleep(50);
            long sent = System.nanoTime();
            t.interrupt();
            t.join(10_000);
            assertFalse(t.isAlive(), "the call did not stop");
            long after = System.nanoTime() - sent;
            assertTrue(o.thrown instanceof CancelledException, "got " + o.thrown);
            assertEquals(ErrorCode.CANCELLED, ((MoteException) o.thrown).code());
            assertTrue(o.interruptedAfter, "the interrupt status stays set");
            assertTrue(after < full / 2 && after < 2_000_000_000L,
                    "stopped " + after / 1_000_000 + " ms after the interrupt (the budget: " + full / 1_000_000 + " ms)");

            // The next call on the same session is not cancelled.
            assertThrows(ResourceExhaustedException.class, main::invoke);
        } finally {
            mod.release();
        }
    }

    /** (b) The same for a Session, and a Session's next call runs normally. */
    @Test
    void interruptCancelsASessionCall() throws Exception {
        try (Model m = Model.load(endless, BudgetsTest.codeFree()); Session s = m.newSession(longRun())) {
            Outcome o = new Outcome();
            Thread t = start(() -> s.call("main"), o);
            Thread.sleep(50);
            t.interrupt();
            t.join(10_000);
            assertFalse(t.isAlive(), "the call did not stop");
            assertTrue(o.thrown instanceof CancelledException, "got " + o.thrown);
            assertTrue(o.interruptedAfter, "the interrupt status stays set");
            assertThrows(ResourceExhaustedException.class, () -> s.call("main"), "runs to its budget");
        }
    }

    /** (c) A thread interrupted before the call gets CancelledException without running. */
    @Test
    void alreadyInterruptedThreadDoesNotRun() {
        Module mod = Module.load(endless, 1, BudgetsTest.codeFree(), new SessionOptions().threads(1));
        try (Model m = Model.load(endless, BudgetsTest.codeFree()); Session s = m.newSession(new SessionOptions().threads(1))) {
            Function main = mod.getFunction("main");
            for (int i = 0; i < 3; i++) {
                Thread.currentThread().interrupt();
                long t0 = System.nanoTime();
                assertThrows(CancelledException.class, main::invoke);
                assertTrue(Thread.currentThread().isInterrupted(), "status kept");
                assertThrows(CancelledException.class, () -> s.call("main"));
                assertTrue(Thread.interrupted(), "status kept");
                // With the default budget (2^28 instructions) a run would take seconds.
                assertTrue(System.nanoTime() - t0 < 1_000_000_000L, "cancelled at once");
            }
            // Not interrupted: the same calls run (to a small budget).
            try (Session small = m.newSession(new SessionOptions().threads(1).maxInstructions(1000))) {
                assertThrows(ResourceExhaustedException.class, () -> small.call("main"));
            }
        } finally {
            mod.release();
        }
    }

    /**
     * A late interrupt: it reaches a call that has finished its work but is not disarmed yet
     * (a test hook holds it there 300 ms), so the call returns its result, the thread stays
     * interrupted, and the interrupt is dropped: the next call on that session (a pool of one;
     * and a Session) runs instead of being cancelled by it.
     */
    @Test
    void aLateInterruptCancelsNoLaterCall() throws Exception {
        Module mod = Module.load(counted, 1, BudgetsTest.codeFree(), new SessionOptions().threads(1));
        try (Model m = Model.load(counted, BudgetsTest.codeFree()); Session s = m.newSession(new SessionOptions().threads(1))) {
            Function main = mod.getFunction("main");
            List<Runnable> calls = new ArrayList<>();
            calls.add(() -> assertEquals(0L, main.call(5L)));
            calls.add(() -> assertEquals(0L, s.call("main", 5L)));
            for (Runnable call : calls) {
                Outcome o = new Outcome();
                TestHooks.pauseBeforeDisarmForTest(300);
                Thread t;
                try {
                    t = start(call, o);
                    Thread.sleep(100);
                    t.interrupt();
                    t.join(10_000);
                } finally {
                    TestHooks.pauseBeforeDisarmForTest(0);
                }
                assertFalse(t.isAlive());
                assertEquals(null, o.thrown, "the call had finished: its result stands");
                assertTrue(o.interruptedAfter, "the interrupt status stays set");
                call.run();
                call.run();
            }
        } finally {
            mod.release();
        }
    }

    /**
     * A Java callback of a model call that calls a model again on the same thread: an
     * interrupt during the inner call cancels the outer one too (the token is shared).
     */
    @Test
    void nestedCallsShareTheInterrupt() throws Exception {
        Module inner = Module.load(endless, 1, BudgetsTest.codeFree(), longRun());
        AtomicInteger innerCalls = new AtomicInteger();
        AtomicReference<Throwable> innerThrew = new AtomicReference<>();
        // Registered before the model loads: a model resolves the names it calls at load.
        Function.register("mote.test.ne", args -> {
                if (innerCalls.incrementAndGet() == 1) {
                    try {
                        inner.getFunction("main").invoke();
                    } catch (RuntimeException e) {
                        innerThrew.set(e);
                    }
                }
                return ((Long) args[0]).longValue() != ((Long) args[1]).longValue() ? 1L : 0L;
            });
        try (Model loop = Model.load(counted, BudgetsTest.codeFree());
             Session outer = loop.newSession(new SessionOptions().threads(1))) {
            Outcome o = new Outcome();
            Thread t = start(() -> outer.call("main", 1000L), o);
            Thread.sleep(50);
            t.interrupt();
            t.join(10_000);
            assertFalse(t.isAlive(), "the call did not stop");
            assertTrue(innerThrew.get() instanceof CancelledException, "inner: " + innerThrew.get());
            assertTrue(o.thrown instanceof CancelledException, "outer: " + o.thrown);
            assertEquals(1, innerCalls.get(), "the outer loop stopped at its next instruction");
            assertTrue(o.interruptedAfter);
        } finally {
            TestHooks.registerTestArithmetic();
            inner.release();
        }
    }

    /**
     * Many threads x many calls, interrupted at random: every call returns its result or
     * throws CancelledException, only on a thread whose interrupt status is set (no call is
     * cancelled by an interrupt sent to another call, or one that came too late to stop its
     * own), and nothing hangs.
     */
    @Test
    void stress() throws Exception {
        final int threads = 6;
        final int calls = 400;
        Module mod = Module.load(counted, 3, BudgetsTest.codeFree(), new SessionOptions().threads(1));
        Model model = Model.load(counted, BudgetsTest.codeFree());
        AtomicInteger ok = new AtomicInteger();
        AtomicInteger cancelled = new AtomicInteger();
        ConcurrentLinkedQueue<String> bad = new ConcurrentLinkedQueue<>();
        AtomicBoolean done = new AtomicBoolean();
        List<Thread> workers = new ArrayList<>();
        try {
            for (int w = 0; w < threads; w++) {
                final int id = w;
                workers.add(new Thread(() -> {
                    Random r = new Random(id);
                    Function f = mod.getFunction("main");
                    try (Session own = model.newSession(new SessionOptions().threads(1))) {
                        for (int i = 0; i < calls; i++) {
                            long n = r.nextInt(200);
                            try {
                                Object got = (i % 2 == 0) ? f.call(n) : own.call("main", n);
                                if (!Long.valueOf(0).equals(got)) {
                                    bad.add("call " + i + " returned " + got);
                                }
                                ok.incrementAndGet();
                            } catch (CancelledException e) {
                                if (!Thread.currentThread().isInterrupted()) {
                                    bad.add("thread " + id + " call " + i + " cancelled without an interrupt");
                                }
                                cancelled.incrementAndGet();
                            } catch (Throwable e) {
                                bad.add("thread " + id + " call " + i + ": " + e);
                            }
                            Thread.interrupted();
                        }
                    }
                }, "stress-" + w));
            }
            Thread chaos = new Thread(() -> {
                Random r = new Random(42);
                while (!done.get()) {
                    workers.get(r.nextInt(threads)).interrupt();
                    long until = System.nanoTime() + r.nextInt(300_000);
                    while (System.nanoTime() < until) {
                        Thread.onSpinWait();
                    }
                }
            }, "stress-chaos");
            workers.forEach(Thread::start);
            chaos.start();
            for (Thread w : workers) {
                w.join(180_000);
                if (w.isAlive()) {
                    fail(w.getName() + " hangs");
                }
            }
            done.set(true);
            chaos.join();
        } finally {
            done.set(true);
            mod.release();
            model.close();
        }
        assertTrue(bad.isEmpty(), bad.size() + " wrong outcomes, first: " + bad.peek());
        assertEquals(threads * calls, ok.get() + cancelled.get());
        assertTrue(ok.get() > 0 && cancelled.get() > 0, ok + " ran, " + cancelled + " cancelled: both must happen");
        System.out.println("InterruptTest.stress: " + ok + " calls returned, " + cancelled + " cancelled");
    }
}
