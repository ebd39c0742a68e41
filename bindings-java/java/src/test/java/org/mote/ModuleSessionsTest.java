package org.mote;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * A Module's sessions are a bounded pool: many threads calling one module concurrently never
 * have more than the bound of sessions alive, sessions are reused, and every call is right.
 * (The pool once made a session, with its own thread pool, for every concurrent call and kept
 * them all.)
 */
class ModuleSessionsTest {
    static final int THREADS = 8;
    static final int CALLS = 25;

    @AfterEach
    void restore() {
        Zoo.registerScaleShift();
    }

    /** {live, idle, peak, created, max} of the module's pool. */
    static long[] counts(Module m) {
        long h = m.handle.acquire();
        try {
            return TestHooks.moduleSessions(h);
        } finally {
            m.handle.release();
        }
    }

    @Test
    void concurrentCallsStayWithinTheBound() throws Exception {
        final int bound = 2;
        // Each call sleeps in its Java callback, so calls of different threads overlap.
        AtomicInteger inCallback = new AtomicInteger();
        AtomicInteger mostInCallback = new AtomicInteger();
        Function.register("mote.zoo.scale_shift", args -> {
            int now = inCallback.incrementAndGet();
            mostInCallback.accumulateAndGet(now, Math::max);
            try {
                Thread.sleep(2);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            inCallback.decrementAndGet();
            return Zoo.scaleShift(args);
        });
        Zoo.Npy input = Zoo.npz("packed.main.inputs.npz", "arg").get(0);
        Zoo.Npy want = Zoo.npz("packed.main.expected.npz", "out").get(0);
        Module mod = Module.load(Zoo.path("packed.so"), bound);
        ExecutorService pool = Executors.newFixedThreadPool(THREADS);
        CyclicBarrier start = new CyclicBarrier(THREADS);
        AtomicInteger right = new AtomicInteger();
        try {
            List<Future<?>> done = new ArrayList<>();
            for (int t = 0; t < THREADS; t++) {
                done.add(pool.submit(() -> {
                    start.await(60, TimeUnit.SECONDS);
                    try (Tensor x = input.toTensor()) {
                        Function f = mod.getFunction("main");
                        for (int i = 0; i < CALLS; i++) {
                            try (Tensor out = (Tensor) f.call(x)) {
                                Zoo.assertClose("packed through the Module", out, want, 1e-5, 1e-5);
                            }
                            right.incrementAndGet();
                        }
                    }
                    return null;
                }));
            }
            for (Future<?> f : done) {
                f.get(300, TimeUnit.SECONDS);
            }
            long[] c = counts(mod);
            assertEquals(THREADS * CALLS, right.get(), "calls with the right output");
            assertEquals(bound, c[4], "the module's bound");
            assertTrue(c[2] <= bound, "at most " + bound + " sessions alive at once, saw " + c[2]);
            assertTrue(c[3] <= bound, "sessions reused: " + c[3] + " made for " + (THREADS * CALLS) + " calls");
            assertEquals(c[0], c[1], "every session is idle after the calls");
            assertTrue(mostInCallback.get() >= 2, "calls overlapped (" + mostInCallback.get() + " at once)");
        } finally {
            pool.shutdownNow();
            mod.release();
        }
    }

    /** The default bound, and a bad one. */
    @Test
    void defaultBound() {
        Module mod = Module.load(Zoo.path("gemm.so"));
        try {
            assertEquals(Module.DEFAULT_MAX_SESSIONS, counts(mod)[4]);
        } finally {
            mod.release();
        }
        assertThrows(IllegalArgumentException.class, () -> Module.load(Zoo.path("gemm.so"), 0));
    }

    /**
     * A callback that calls the same module again, with a bound of one: the nested call gets a
     * session of its own (dropped afterwards) instead of waiting forever for the caller's.
     */
    @Test
    void nestedCallDoesNotWaitForItself() throws Exception {
        Module mod = Module.load(Zoo.path("packed.so"), 1);
        Zoo.Npy input = Zoo.npz("packed.main.inputs.npz", "arg").get(0);
        Zoo.Npy want = Zoo.npz("packed.main.expected.npz", "out").get(0);
        AtomicInteger depth = new AtomicInteger();
        Function.register("mote.zoo.scale_shift", args -> {
            if (depth.incrementAndGet() == 1) {
                try (Tensor x = input.toTensor(); Tensor inner = (Tensor) mod.getFunction("main").call(x)) {
                    Zoo.assertClose("the nested call", inner, want, 1e-5, 1e-5);
                } catch (Exception e) {
                    throw new IllegalStateException(e);
                }
            }
            return Zoo.scaleShift(args);
        });
        ExecutorService one = Executors.newSingleThreadExecutor();
        try (Tensor x = input.toTensor()) {
            Future<Object> r = one.submit(() -> mod.getFunction("main").call(x));
            try (Tensor out = (Tensor) r.get(60, TimeUnit.SECONDS)) {
                Zoo.assertClose("the outer call", out, want, 1e-5, 1e-5);
            }
            long[] c = counts(mod);
            assertEquals(1, c[0], "the nested call's extra session was dropped");
            assertEquals(2, c[3], "two sessions were made");
        } finally {
            one.shutdownNow();
            mod.release();
        }
    }
}
