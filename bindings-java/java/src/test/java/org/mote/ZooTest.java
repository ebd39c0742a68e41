package org.mote;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;

/**
 * Every case of every zoo model, through the idiomatic layer (Model/Session, 1 and 2
 * threads, twice per session) and through the tvm4j layer (Module/Function/NDArray), against
 * TVM's outputs. Kernel-only libraries get output buffers filled with 0xFF (NaN / -1) first.
 */
class ZooTest {
    @BeforeAll
    static void register() {
        Zoo.registerScaleShift();
    }

    /** A case's arguments: tensors, scalars (0-d arrays) as Double/Long, outputs poisoned. */
    static List<Object> args(Zoo.Case c, boolean ndarray) throws Exception {
        List<Zoo.Npy> in = Zoo.npz(c.inputs, "arg");
        List<Object> out = new ArrayList<>();
        for (int i = 0; i < in.size(); i++) {
            Zoo.Npy n = in.get(i);
            if (c.scalars.contains(i)) {
                double v = Zoo.values(n.dtype, n.data)[0];
                out.add(n.dtype.startsWith("float") ? (Object) v : (Object) (long) v);
                continue;
            }
            Tensor t = ndarray ? NDArray.empty(n.shape, n.dtype, Device.cpu()) : Tensor.empty(n.shape, n.dtype);
            byte[] data = n.data.clone();
            if (c.outputs.contains(i)) {
                Arrays.fill(data, (byte) 0xFF);
            }
            t.copyFromRaw(data);
            out.add(t);
        }
        return out;
    }

    static void closeAll(List<Object> args) {
        for (Object o : args) {
            if (o instanceof Tensor) {
                ((Tensor) o).close();
            }
        }
    }

    static void check(Zoo.Case c, String what, Object result, List<Object> args) throws Exception {
        List<Zoo.Npy> want = Zoo.npz(c.expected, "out");
        List<Tensor> got = new ArrayList<>();
        if (c.kind.equals("kernels")) {
            assertNull(result, what + ": a kernel returns nothing");
            for (int i : c.outputs) {
                got.add((Tensor) args.get(i));
            }
        } else {
            Values.flatten(result, got);
        }
        assertEquals(want.size(), got.size(), what + ": number of outputs");
        for (int i = 0; i < want.size(); i++) {
            Zoo.assertClose(what + " out" + i, got.get(i), want.get(i), c.rtol, c.atol);
        }
        if (!c.kind.equals("kernels")) {
            for (Tensor t : got) {
                t.close();
            }
        }
    }

    @TestFactory
    Stream<DynamicTest> idiomatic() throws Exception {
        return Zoo.cases().stream().map(c -> DynamicTest.dynamicTest(c.toString(), () -> {
            try (Model model = Model.load(Zoo.path(c.file))) {
                assertEquals(c.kind.equals("kernels"), model.isKernelLibrary(), c + ": kernel library");
                for (int threads : new int[] {1, 2}) {
                    SessionOptions o = new SessionOptions().threads(threads).poisonMemory(true);
                    try (Session s = model.newSession(o)) {
                        for (String run : new String[] {"first", "second"}) {
                            String what = c + " (" + threads + " threads, " + run + " run)";
                            List<Object> args = args(c, false);
                            try {
                                if (c.expectError != null) {
                                    KernelException e = assertThrows(KernelException.class,
                                            () -> s.call(c.function, args.toArray()), what);
                                    assertTrue(e.getMessage().contains(c.expectError), what + ": " + e.getMessage());
                                    assertEquals(ErrorCode.KERNEL, e.code());
                                } else if (c.mode.equals("stateful")) {
                                    s.setInput(c.function, args.toArray());
                                    s.invokeStateful(c.function);
                                    check(c, what, s.getOutput(c.function), args);
                                } else {
                                    check(c, what, s.call(c.function, args.toArray()), args);
                                }
                            } finally {
                                closeAll(args);
                            }
                        }
                    }
                }
            }
        }));
    }

    @TestFactory
    Stream<DynamicTest> tvm4j() throws Exception {
        return Zoo.cases().stream().map(c -> DynamicTest.dynamicTest(c.toString(), () -> {
            Module m = Module.load(Zoo.path(c.file));
            try {
                for (String run : new String[] {"first", "second"}) {
                    String what = c + " (tvm4j, " + run + " run)";
                    Function f = m.getFunction(c.function);
                    List<Object> args = args(c, true);
                    try {
                        for (Object a : args) {
                            if (a instanceof NDArray) {
                                f.pushArg((NDArray) a);
                            } else if (a instanceof Double) {
                                f.pushArg((double) (Double) a);
                            } else {
                                f.pushArg((long) (Long) a);
                            }
                        }
                        if (c.expectError != null) {
                            KernelException e = assertThrows(KernelException.class, f::invoke, what);
                            assertTrue(e.getMessage().contains(c.expectError), what + ": " + e.getMessage());
                        } else {
                            Object r = f.invoke();
                            if (r instanceof Tensor) {
                                assertTrue(r instanceof NDArray, what + ": the tvm4j layer returns NDArrays");
                            }
                            check(c, what, r, args);
                        }
                    } finally {
                        closeAll(args);
                    }
                }
            } finally {
                m.release();
            }
        }));
    }

    /** TVM's tvm4j example, package aside: load a kernel library, run its entry function. */
    @Test
    void tvm4jDocsExample() throws Exception {
        Module fgemm = Module.load(Zoo.path("gemm.so"));
        Device dev = Device.cpu();
        List<Zoo.Npy> in = Zoo.npz("gemm.gemm.inputs.npz", "arg");
        NDArray a = NDArray.empty(in.get(0).shape, dev);
        a.copyFrom(floats(in.get(0)));
        NDArray b = NDArray.empty(in.get(1).shape, dev);
        b.copyFrom(floats(in.get(1)));
        NDArray res = NDArray.empty(in.get(2).shape, dev);
        fgemm.entryFunc().pushArg(a).pushArg(b).pushArg(res).invoke();
        Zoo.Npy want = Zoo.npz("gemm.gemm.expected.npz", "out").get(0);
        Zoo.assertClose("gemm via entryFunc", Zoo.doubles(res.asFloatArray()), Zoo.values("float32", want.data), 1e-5, 1e-5);
        a.release();
        b.release();
        res.release();
        fgemm.release();
    }

    static float[] floats(Zoo.Npy n) {
        double[] d = Zoo.values(n.dtype, n.data);
        float[] f = new float[d.length];
        for (int i = 0; i < d.length; i++) {
            f[i] = (float) d[i];
        }
        return f;
    }
}
