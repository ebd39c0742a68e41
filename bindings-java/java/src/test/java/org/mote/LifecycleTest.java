package org.mote;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/** close() frees once; a closed object throws; the backstop frees what was never closed. */
class LifecycleTest {
    @Test
    void closeTwiceAndUseAfterClose() {
        Model m = Model.load(Zoo.path("mlp.so"));
        Session s = m.newSession();
        Tensor t = Tensor.empty(new long[] {2, 16}, "float32");
        assertFalse(t.isClosed());
        t.close();
        t.close();
        assertTrue(t.isClosed());
        IllegalStateException e = assertThrows(IllegalStateException.class, t::shape);
        assertEquals("Tensor is closed", e.getMessage());
        assertThrows(IllegalStateException.class, () -> t.copyFrom(new float[32]));
        assertThrows(IllegalStateException.class, t::asFloatArray);
        assertThrows(IllegalStateException.class, () -> s.run("forward", t, t, t, t, t));
        s.close();
        s.close();
        assertThrows(IllegalStateException.class, () -> s.run("forward"));
        assertThrows(IllegalStateException.class, s::profile);
        // Sessions keep the model's code: closing the model first is fine for them.
        Session s2 = m.newSession();
        m.close();
        m.close();
        assertThrows(IllegalStateException.class, m::newSession);
        assertThrows(IllegalStateException.class, m::functionNames);
        assertEquals(1, s2.run("forward", zeros(2, 16), zeros(32, 16), zeros(32), zeros(8, 32), zeros(8)).length);
        s2.close();
        Module mod = Module.load(Zoo.path("gemm.so"));
        Function f = mod.entryFunc();
        mod.release();
        mod.release();
        assertThrows(IllegalStateException.class, () -> f.call(zeros(64, 32), zeros(32, 48), zeros(64, 48)));
        assertThrows(IllegalStateException.class, mod::functionNames);
    }

    static Tensor zeros(long... shape) {
        return Tensor.empty(shape, "float32");
    }

    /** close() frees the native tensor exactly once. */
    @Test
    void closeFreesOnce() {
        long before = TestHooks.liveTensors();
        Tensor t = Tensor.empty(new long[] {4}, "float32");
        Tensor u = Tensor.empty(new long[] {4}, "float32");
        assertEquals(before + 2, TestHooks.liveTensors());
        t.close();
        t.close();
        assertEquals(before + 1, TestHooks.liveTensors());
        u.close();
        assertEquals(before, TestHooks.liveTensors());
    }

    /**
     * A tvm4j array on an RPC session's device has no host array until its first copy, and
     * release() frees the one it made.
     */
    @Test
    void aRemoteArrayMakesItsHostArrayAtItsFirstCopy() {
        org.mote.rpc.Server server = org.mote.rpc.Server.builder().port(0).start();
        try {
            org.mote.tvm4j.rpc.RPCSession s = org.mote.tvm4j.rpc.Client.connect("127.0.0.1",
                    server.port().orElseThrow());
            long before = TestHooks.liveTensors();
            org.mote.tvm4j.Tensor a = org.mote.tvm4j.Tensor.empty(new long[] {1000},
                    new org.mote.tvm4j.TVMType("float32"), s.device("cpu"));
            assertEquals(1000, a.size());
            assertEquals(before, TestHooks.liveTensors(), "no host array yet");
            a.copyFrom(new float[1000]);
            assertEquals(before + 1, TestHooks.liveTensors(), "the host array of the first copy");
            assertEquals(1000, a.asFloatArray().length);
            assertEquals(before + 1, TestHooks.liveTensors(), "the same host array again");
            a.release();
            assertEquals(before, TestHooks.liveTensors());
            assertThrows(IllegalStateException.class, a::shape);
            s.remoteSession().close();
        } finally {
            server.stop();
        }
    }

    /** close() from many threads at once frees each tensor exactly once, and never throws. */
    @Test
    void concurrentCloseFreesOnce() throws Exception {
        long before = TestHooks.liveTensors();
        java.util.List<Tensor> ts = new java.util.ArrayList<>();
        for (int i = 0; i < 200; i++) {
            ts.add(Tensor.empty(new long[] {16}, "float32"));
        }
        assertEquals(before + 200, TestHooks.liveTensors());
        java.util.concurrent.ExecutorService pool = java.util.concurrent.Executors.newFixedThreadPool(8);
        java.util.concurrent.CyclicBarrier start = new java.util.concurrent.CyclicBarrier(8);
        java.util.List<java.util.concurrent.Future<?>> done = new java.util.ArrayList<>();
        for (int t = 0; t < 8; t++) {
            done.add(pool.submit(() -> {
                start.await();
                for (Tensor x : ts) {
                    x.close();
                }
                return null;
            }));
        }
        for (java.util.concurrent.Future<?> f : done) {
            f.get(60, java.util.concurrent.TimeUnit.SECONDS);
        }
        pool.shutdown();
        assertEquals(before, TestHooks.liveTensors());
        for (Tensor x : ts) {
            assertTrue(x.isClosed());
        }
    }

    /** Tensors nobody closed are freed by the backstop (a phantom reference, not Cleaner) once unreachable. */
    @Test
    void unclosedTensorsAreFreedByTheBackstop() throws Exception {
        // Let earlier tests' unreachable tensors go first, so only this test's are counted.
        for (int i = 0; i < 10; i++) {
            System.gc();
            Thread.sleep(20);
        }
        long before = TestHooks.liveTensors();
        for (int i = 0; i < 200; i++) {
            Tensor.empty(new long[] {1 << 16}, "float32");
        }
        assertTrue(TestHooks.liveTensors() >= before + 1, "some are alive before a GC");
        long deadline = System.nanoTime() + 20_000_000_000L;
        while (TestHooks.liveTensors() > before && System.nanoTime() < deadline) {
            System.gc();
            Thread.sleep(20);
        }
        assertTrue(TestHooks.liveTensors() <= before, "the backstop freed every unclosed tensor: "
                + TestHooks.liveTensors() + " live, " + before + " before");
    }
}
