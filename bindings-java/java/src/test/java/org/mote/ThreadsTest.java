package org.mote;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/** The threading rules: a Model is shared, a Session is one thread's at a time. */
class ThreadsTest {
    /** One model, 4 threads, a session each; every run of every thread matches TVM. */
    @Test
    void sharedModelOneSessionPerThread() throws Exception {
        List<Zoo.Npy> in = Zoo.npz("mlp.forward.inputs.npz", "arg");
        Zoo.Npy want = Zoo.npz("mlp.forward.expected.npz", "out").get(0);
        AtomicInteger runs = new AtomicInteger();
        try (Model model = Model.load(Zoo.path("mlp.so"))) {
            ExecutorService pool = Executors.newFixedThreadPool(4);
            List<Future<?>> done = new ArrayList<>();
            for (int t = 0; t < 4; t++) {
                done.add(pool.submit(() -> {
                    List<Tensor> args = new ArrayList<>();
                    for (Zoo.Npy n : in) {
                        args.add(n.toTensor());
                    }
                    try (Session s = model.newSession(new SessionOptions().threads(2).poisonMemory(true))) {
                        for (int i = 0; i < 25; i++) {
                            try (Tensor out = s.run("forward", args.toArray(new Tensor[0]))[0]) {
                                Zoo.assertClose("mlp run " + i, out, want, 1e-5, 1e-5);
                            }
                            runs.incrementAndGet();
                        }
                    } finally {
                        args.forEach(Tensor::close);
                    }
                    return null;
                }));
            }
            for (Future<?> f : done) {
                f.get(120, TimeUnit.SECONDS);
            }
            pool.shutdown();
        }
        assertEquals(100, runs.get());
    }

    /**
     * A session used from a second thread while a call runs throws instead of racing. The
     * first call is held inside its Java callback (the packed model's) until the second thread
     * has tried.
     */
    @Test
    void sessionFromTwoThreadsThrows() throws Exception {
        CountDownLatch inside = new CountDownLatch(1);
        CountDownLatch tried = new CountDownLatch(1);
        Function.register("mote.zoo.scale_shift", args -> {
            inside.countDown();
            try {
                tried.await(30, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            return Zoo.scaleShift(args);
        });
        try (Model m = Model.load(Zoo.path("packed.so")); Session s = m.newSession();
             Tensor x = Zoo.npz("packed.main.inputs.npz", "arg").get(0).toTensor()) {
            ExecutorService pool = Executors.newSingleThreadExecutor();
            Future<Tensor[]> first = pool.submit(() -> s.run("main", x));
            assertTrue(inside.await(30, TimeUnit.SECONDS), "the first call reached the callback");
            IllegalStateException e = assertThrows(IllegalStateException.class, () -> s.run("main", x));
            assertTrue(e.getMessage().contains("session in use by another thread"), e.getMessage());
            tried.countDown();
            Tensor[] out = first.get(30, TimeUnit.SECONDS);
            Zoo.assertClose("the first call", out[0], Zoo.npz("packed.main.expected.npz", "out").get(0), 1e-5, 1e-5);
            out[0].close();
            // Free again: the same session works from this thread now.
            s.run("main", x)[0].close();
            pool.shutdown();
        } finally {
            Zoo.registerScaleShift();
        }
    }

    /** A callback re-entering its own session gets IllegalStateException, not a deadlock. */
    @Test
    void reentryThrows() throws Exception {
        try (Model m = Model.load(Zoo.path("packed.so")); Session s = m.newSession();
             Tensor x = Zoo.npz("packed.main.inputs.npz", "arg").get(0).toTensor()) {
            Function.register("mote.zoo.scale_shift", args -> {
                s.run("main", x);
                return null;
            });
            MoteException e = assertThrows(MoteException.class, () -> s.run("main", x));
            assertTrue(e.getMessage().contains("session in use"), e.getMessage());
        } finally {
            Zoo.registerScaleShift();
        }
    }

    /** A Module is shared: concurrent calls each get a session. */
    @Test
    void sharedModule() throws Exception {
        List<Zoo.Npy> in = Zoo.npz("gemm.gemm.inputs.npz", "arg");
        Zoo.Npy want = Zoo.npz("gemm.gemm.expected.npz", "out").get(0);
        Module mod = Module.load(Zoo.path("gemm.so"));
        ExecutorService pool = Executors.newFixedThreadPool(4);
        List<Future<?>> done = new ArrayList<>();
        for (int t = 0; t < 4; t++) {
            done.add(pool.submit(() -> {
                for (int i = 0; i < 10; i++) {
                    try (Tensor a = in.get(0).toTensor(); Tensor b = in.get(1).toTensor();
                         Tensor c = Tensor.empty(want.shape, "float32")) {
                        mod.getFunction("gemm").call(a, b, c);
                        Zoo.assertClose("gemm", c, want, 1e-5, 1e-5);
                    }
                }
                return null;
            }));
        }
        for (Future<?> f : done) {
            f.get(120, TimeUnit.SECONDS);
        }
        pool.shutdown();
        mod.release();
    }
}
