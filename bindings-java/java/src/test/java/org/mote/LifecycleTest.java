package org.mote;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/** close() frees once; a closed object throws; the Cleaner frees what was never closed. */
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
        long before = NativeBridge.liveTensors();
        Tensor t = Tensor.empty(new long[] {4}, "float32");
        Tensor u = Tensor.empty(new long[] {4}, "float32");
        assertEquals(before + 2, NativeBridge.liveTensors());
        t.close();
        t.close();
        assertEquals(before + 1, NativeBridge.liveTensors());
        u.close();
        assertEquals(before, NativeBridge.liveTensors());
    }

    /** Tensors nobody closed are freed by the Cleaner once unreachable. */
    @Test
    void cleanerIsTheBackstop() throws Exception {
        // Let earlier tests' unreachable tensors go first, so only this test's are counted.
        for (int i = 0; i < 10; i++) {
            System.gc();
            Thread.sleep(20);
        }
        long before = NativeBridge.liveTensors();
        for (int i = 0; i < 200; i++) {
            Tensor.empty(new long[] {1 << 16}, "float32");
        }
        assertTrue(NativeBridge.liveTensors() >= before + 1, "some are alive before a GC");
        long deadline = System.nanoTime() + 20_000_000_000L;
        while (NativeBridge.liveTensors() > before && System.nanoTime() < deadline) {
            System.gc();
            Thread.sleep(20);
        }
        assertTrue(NativeBridge.liveTensors() <= before, "the Cleaner freed every unclosed tensor: "
                + NativeBridge.liveTensors() + " live, " + before + " before");
    }
}
