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

    /** Many unclosed tensors of 4 MB each: the Cleaner frees them (else this needs 4 GB). */
    @Test
    void cleanerIsTheBackstop() throws Exception {
        Runtime rt = Runtime.getRuntime();
        for (int i = 0; i < 1000; i++) {
            Tensor.empty(new long[] {1 << 20}, "float32");
            if (i % 50 == 0) {
                System.gc();
                Thread.sleep(5);
            }
        }
        assertTrue(rt.totalMemory() > 0);
    }
}
