package org.mote.tvm4j;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/** tvm4j's Tensor/NDArray, TVMType and Device on Mote: what tvm4j's TensorTest checks, and more. */
class Tvm4jTensorTest {
    private static final long[] SHAPE = {2, 2};

    private static Tensor make(String dtype, boolean old) {
        return old ? NDArray.empty(SHAPE, new TVMType(dtype)) : Tensor.empty(SHAPE, new TVMType(dtype));
    }

    @Test
    void everyElementTypeRoundTrips() {
        for (boolean old : new boolean[] {false, true}) {
            Tensor t = make("float32", old);
            t.copyFrom(new float[] {1, 2, 3, 4.5f});
            assertArrayEquals(new float[] {1, 2, 3, 4.5f}, t.asFloatArray(), 0f);
            t.release();
            t = make("float64", old);
            t.copyFrom(new double[] {1, 2, 3, -4.25});
            assertArrayEquals(new double[] {1, 2, 3, -4.25}, t.asDoubleArray(), 0);
            t.release();
            t = make("int8", old);
            t.copyFrom(new byte[] {1, 2, 3, -128});
            assertArrayEquals(new byte[] {1, 2, 3, -128}, t.asByteArray());
            t.release();
            t = make("int16", old);
            t.copyFrom(new short[] {1, 2, 3, -32768});
            assertArrayEquals(new short[] {1, 2, 3, -32768}, t.asShortArray());
            t.release();
            t = make("int32", old);
            t.copyFrom(new int[] {1, 2, 3, Integer.MIN_VALUE});
            assertArrayEquals(new int[] {1, 2, 3, Integer.MIN_VALUE}, t.asIntArray());
            t.release();
            t = make("int64", old);
            t.copyFrom(new long[] {1, 2, 3, Long.MAX_VALUE});
            assertArrayEquals(new long[] {1, 2, 3, Long.MAX_VALUE}, t.asLongArray());
            t.release();
            t = make("uint16", old);
            t.copyFrom(new char[] {65535, 2, 3, 4});
            assertArrayEquals(new char[] {65535, 2, 3, 4}, t.asCharArray());
            // uint16 is little-endian in memory, as tvm4j's raw copies see it.
            assertArrayEquals(new byte[] {-1, -1, 2, 0, 3, 0, 4, 0}, t.internal());
            t.release();
        }
    }

    @Test
    void ndArrayIsTheSameClassFamily() {
        NDArray a = NDArray.empty(new long[] {3});
        assertTrue(a instanceof Tensor);
        assertTrue(a.asTensor() == a && a.asNDArray() == a);
        assertEquals(new TVMType("float32"), a.dtype());
        assertEquals(Device.cpu(), a.device());
        assertArrayEquals(new long[] {3}, a.shape());
        assertEquals(3, a.size());
        a.release();
    }

    @Test
    void wrongTypesAndSizesAreIllegalArguments() {
        Tensor t = Tensor.empty(SHAPE, new TVMType("int32"));
        assertThrows(IllegalArgumentException.class, () -> t.copyFrom(new float[4]));
        assertThrows(IllegalArgumentException.class, () -> t.copyFrom(new int[3]));
        assertThrows(IllegalArgumentException.class, t::asFloatArray);
        assertThrows(IllegalArgumentException.class, t::asCharArray);
        Tensor u8 = Tensor.empty(SHAPE, new TVMType("uint8"));
        // tvm4j: byte[] is for int8 arrays only.
        assertThrows(IllegalArgumentException.class, () -> u8.copyFrom(new byte[4]));
        u8.copyFromRaw(new byte[] {1, 2, 3, (byte) 255});
        assertArrayEquals(new byte[] {1, 2, 3, (byte) 255}, u8.internal());
        assertThrows(org.mote.MismatchException.class, () -> u8.copyFromRaw(new byte[3]));
        t.release();
        u8.release();
    }

    @Test
    void copyToNeedsTheSameTypeAndShape() {
        Tensor a = Tensor.empty(new long[] {2});
        a.copyFrom(new float[] {1, 2});
        Tensor b = Tensor.empty(new long[] {2});
        assertTrue(a.copyTo(b) == b);
        assertArrayEquals(new float[] {1, 2}, b.asFloatArray(), 0f);
        NDArray c = NDArray.empty(new long[] {2});
        NDArrayBase r = c.asNDArray();
        assertTrue(a.copyTo(r) == c);
        assertArrayEquals(new float[] {1, 2}, c.asFloatArray(), 0f);
        assertThrows(IllegalArgumentException.class, () -> a.copyTo(Tensor.empty(new long[] {3})));
        assertThrows(IllegalArgumentException.class, () -> a.copyTo(Tensor.empty(new long[] {2}, new TVMType("int32"))));
        a.release();
        b.release();
        c.release();
    }

    @Test
    void releaseSemantics() {
        Tensor t = Tensor.empty(new long[] {2});
        t.release();
        t.release(); // a second release does nothing
        assertThrows(IllegalStateException.class, t::asFloatArray);
        assertThrows(IllegalStateException.class, t::shape);
        assertThrows(IllegalStateException.class, () -> t.copyFrom(new float[2]));
        assertEquals("Tensor(released)", t.toString());
        Function f = Function.convertFunc(args -> 1L);
        assertThrows(IllegalStateException.class, () -> f.pushArg(t).invoke());
        f.release();
    }

    @Test
    void typesParseAsTvm4jDoes() {
        TVMType f = new TVMType("float32");
        assertEquals(TVMType.FLOAT, f.typeCode);
        assertEquals(32, f.bits);
        assertEquals(4, f.numOfBytes);
        assertEquals(1, f.lanes);
        assertEquals("float32", f.toString());
        TVMType u = new TVMType("uint16");
        assertEquals(TVMType.UINT, u.typeCode);
        assertEquals(2, u.numOfBytes);
        assertEquals(TVMType.INT, new TVMType("int8").typeCode);
        assertEquals(32, new TVMType("int").bits);
        assertEquals(TVMType.HANDLE, new TVMType("handle").typeCode);
        assertEquals(new TVMType("float32", 4), new TVMType("float32", 4));
        assertEquals("float32x4", new TVMType("float32", 4).toString());
        assertThrows(IllegalArgumentException.class, () -> new TVMType("bogus"));
        assertThrows(IllegalArgumentException.class, () -> new TVMType("int4"));
        assertThrows(IllegalArgumentException.class, () -> new TVMType("float24"));
    }

    @Test
    void devicesExistOnlyWhereMoteRuns() {
        assertTrue(new Device("cpu", 0).exist());
        assertTrue(Device.cpu().exist());
        assertEquals(Device.cpu(), new Device(1, 0));
        assertEquals("cpu(0)", Device.cpu().toString());
        assertTrue(!new Device("cuda", 0).exist());
        assertTrue(!Device.cuda().exist() && !Device.vulkan().exist() && !Device.metal().exist()
                && !Device.vpi().exist() && !Device.hexagon().exist());
        assertEquals(Device.opencl(0), new Device("cl", 0));
        boolean cl = !org.mote.rpc.Server.openclStatus().startsWith("OpenCL: none");
        assertEquals(cl, Device.opencl().exist());
        assertTrue(!Device.opencl(1000).exist());
        assertEquals(cl, Module.enabled("opencl"));
        assertThrows(IllegalArgumentException.class, () -> new Device("tpu", 0));
        assertThrows(IllegalArgumentException.class, () -> Tensor.empty(new long[] {2}, Device.cuda()));
        assertThrows(IllegalArgumentException.class, () -> NDArray.empty(new long[] {2}, Device.opencl()));
        assertThrows(UnsupportedOperationException.class, () -> Device.cuda().sync());
        Device.cpu().sync();
    }
}
