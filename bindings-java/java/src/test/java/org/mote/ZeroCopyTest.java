package org.mote;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.util.List;
import org.junit.jupiter.api.Test;

/** Direct ByteBuffers shared with native code, both ways, without copies. */
class ZeroCopyTest {
    @Test
    void alignedBuffers() {
        for (int n : new int[] {1, 60, 64, 1000}) {
            ByteBuffer b = Tensor.allocateBuffer(n);
            assertEquals(n, b.capacity());
            try (Tensor t = Tensor.fromBuffer(b, new long[] {n}, "uint8")) {
                assertEquals(0, t.address() % Tensor.ALIGNMENT);
            }
        }
    }

    /** A direct buffer of {@code bytes} bytes whose address is {@code misalignment} past a multiple of 64. */
    static ByteBuffer misaligned(int misalignment, int bytes) {
        ByteBuffer base = Tensor.allocateBuffer(bytes + Tensor.ALIGNMENT);
        base.position(misalignment);
        ByteBuffer s = base.slice();
        s.limit(bytes);
        return s.slice().order(ByteOrder.LITTLE_ENDIAN);
    }

    /**
     * A direct buffer at any misalignment (1..63 bytes past a multiple of 64) is accepted and
     * copied: gemm on tensors made from such buffers gives TVM's result in the output tensor,
     * the copies are aligned, and the buffer given for the output is left as it was (its
     * tensor is a copy, README "Zero copy and alignment").
     */
    @Test
    void unalignedBuffersAreCopied() throws Exception {
        List<Zoo.Npy> in = Zoo.npz("gemm.gemm.inputs.npz", "arg");
        Zoo.Npy want = Zoo.npz("gemm.gemm.expected.npz", "out").get(0);
        try (Model m = Model.load(Zoo.path("gemm.so")); Session s = m.newSession()) {
            for (int k = 1; k < Tensor.ALIGNMENT; k++) {
                ByteBuffer a = misaligned(k, in.get(0).data.length);
                ByteBuffer b = misaligned(k, in.get(1).data.length);
                ByteBuffer c = misaligned(k, want.data.length);
                a.put(in.get(0).data).rewind();
                b.put(in.get(1).data).rewind();
                for (int i = 0; i < c.capacity(); i++) {
                    c.put(i, (byte) 0xFF);
                }
                try (Tensor ta = Tensor.fromBuffer(a, in.get(0).shape, "float32");
                     Tensor tb = Tensor.fromBuffer(b, in.get(1).shape, "float32");
                     Tensor tc = Tensor.fromBuffer(c, want.shape, "float32")) {
                    assertEquals(0, ta.address() % Tensor.ALIGNMENT, "the copy is aligned");
                    s.call("gemm", ta, tb, tc);
                    Zoo.assertClose("gemm from buffers misaligned by " + k, tc, want, 1e-5, 1e-5);
                }
                for (int i = 0; i < c.capacity(); i++) {
                    assertEquals((byte) 0xFF, c.get(i), "the output buffer (copied) is untouched at " + i);
                }
            }
        }
    }

    /** A model input from misaligned buffers gives TVM's output. */
    @Test
    void unalignedModelInput() throws Exception {
        Zoo.Npy x = Zoo.npz("cnn.forward.inputs.npz", "arg").get(0);
        Zoo.Npy want = Zoo.npz("cnn.forward.expected.npz", "out").get(0);
        try (Model m = Model.load(Zoo.path("cnn.so")); Session s = m.newSession()) {
            for (int k : new int[] {1, 4, 17, 32, 63}) {
                ByteBuffer buf = misaligned(k, x.data.length);
                buf.put(x.data).rewind();
                try (Tensor t = Tensor.fromBuffer(buf, x.shape, "float32"); Tensor out = s.run("forward", t)[0]) {
                    Zoo.assertClose("cnn from a buffer misaligned by " + k, out, want, 1e-5, 1e-5);
                }
            }
        }
    }

    /** Plain ByteBuffer.allocateDirect buffers (whatever their alignment) are all accepted, with their bytes. */
    @Test
    void plainDirectBuffers() {
        for (int i = 0; i < 200; i++) {
            ByteBuffer b = ByteBuffer.allocateDirect(4 * 16).order(ByteOrder.LITTLE_ENDIAN);
            for (int j = 0; j < 16; j++) {
                b.putFloat(4 * j, i + j);
            }
            try (Tensor t = Tensor.fromBuffer(b, new long[] {16}, "float32")) {
                float[] got = t.asFloatArray();
                for (int j = 0; j < 16; j++) {
                    assertEquals(i + j, got[j], 0f);
                }
            }
        }
    }

    /**
     * An aligned part of a plain direct buffer is still wrapped without a copy: the tensor's
     * address is the buffer's, and a kernel's output lands in the buffer.
     */
    @Test
    void alignedSliceOfAPlainBufferIsZeroCopy() throws Exception {
        List<Zoo.Npy> in = Zoo.npz("gemm.gemm.inputs.npz", "arg");
        Zoo.Npy want = Zoo.npz("gemm.gemm.expected.npz", "out").get(0);
        ByteBuffer raw = ByteBuffer.allocateDirect(want.data.length + Tensor.ALIGNMENT);
        long addr = NativeBridge.bufferAddress(raw);
        int skip = (int) (-addr & (Tensor.ALIGNMENT - 1));
        raw.position(skip);
        ByteBuffer c = raw.slice();
        c.limit(want.data.length);
        c = c.slice();
        try (Model m = Model.load(Zoo.path("gemm.so")); Session s = m.newSession();
             Tensor ta = in.get(0).toTensor(); Tensor tb = in.get(1).toTensor();
             Tensor tc = Tensor.fromBuffer(c, want.shape, "float32")) {
            assertEquals(addr + skip, tc.address(), "the tensor is the buffer's memory");
            s.call("gemm", ta, tb, tc);
            byte[] got = new byte[c.capacity()];
            c.get(got).rewind();
            Zoo.assertClose("gemm into a plain buffer's aligned part", Zoo.values("float32", got), Zoo.values("float32", want.data), 1e-5, 1e-5);
        }
        assertTrue(skip >= 0 && skip < Tensor.ALIGNMENT);
    }

    /** Java writes the buffer, Mote reads it (inputs); a kernel writes, Java reads (outputs). */
    @Test
    void kernelReadsAndWritesJavaBuffers() throws Exception {
        List<Zoo.Npy> in = Zoo.npz("gemm.gemm.inputs.npz", "arg");
        Zoo.Npy want = Zoo.npz("gemm.gemm.expected.npz", "out").get(0);
        ByteBuffer a = Tensor.allocateBuffer(in.get(0).data.length);
        ByteBuffer b = Tensor.allocateBuffer(in.get(1).data.length);
        ByteBuffer c = Tensor.allocateBuffer(want.data.length);
        a.put(in.get(0).data).rewind();
        b.put(in.get(1).data).rewind();
        for (int i = 0; i < c.capacity(); i++) {
            c.put(i, (byte) 0xFF);
        }
        try (Model m = Model.load(Zoo.path("gemm.so")); Session s = m.newSession();
             Tensor ta = Tensor.fromBuffer(a, in.get(0).shape, "float32");
             Tensor tb = Tensor.fromBuffer(b, in.get(1).shape, "float32");
             Tensor tc = Tensor.fromBuffer(c, want.shape, "float32")) {
            s.call("gemm", ta, tb, tc);
            byte[] got = new byte[c.capacity()];
            c.get(got).rewind();
            Zoo.assertClose("gemm into a Java buffer", Zoo.values("float32", got), Zoo.values("float32", want.data), 1e-5, 1e-5);
            // Change an input in Java only: the next call sees it (doubling A doubles C).
            FloatBuffer fa = a.asFloatBuffer();
            for (int i = 0; i < fa.capacity(); i++) {
                fa.put(i, fa.get(i) * 2);
            }
            s.call("gemm", ta, tb, tc);
            c.get(got).rewind();
            double[] w = Zoo.values("float32", want.data);
            for (int i = 0; i < w.length; i++) {
                w[i] *= 2;
            }
            Zoo.assertClose("gemm after changing A in Java", Zoo.values("float32", got), w, 1e-5, 1e-5);
        }
    }

    /** A model's output seen through asByteBuffer is the tensor's memory, and outlives close. */
    @Test
    void outputViews() throws Exception {
        List<Zoo.Npy> in = Zoo.npz("cnn.forward.inputs.npz", "arg");
        try (Model m = Model.load(Zoo.path("cnn.so")); Session s = m.newSession();
             Tensor x = in.get(0).toTensor()) {
            Tensor out = s.run("forward", x)[0];
            float[] copy = out.asFloatArray();
            ByteBuffer view = out.asByteBuffer();
            FloatBuffer fv = view.asFloatBuffer();
            assertEquals(copy.length, fv.capacity());
            for (int i = 0; i < copy.length; i++) {
                assertEquals(copy[i], fv.get(i));
            }
            // Writing through the view changes the tensor itself.
            fv.put(0, 1234.5f);
            assertEquals(1234.5f, out.asFloatArray()[0]);
            // The memory is shared now: copyFrom refuses (write through the view instead).
            assertThrows(IllegalStateException.class, () -> out.copyFrom(copy));
            out.close();
            // The view keeps the memory alive after close.
            assertEquals(1234.5f, fv.get(0));
            assertNotEquals(0, fv.capacity());
        }
    }

    /** An input given as a buffer: changing the buffer in Java changes the next run's output. */
    @Test
    void modelInputFromBuffer() throws Exception {
        List<Zoo.Npy> in = Zoo.npz("cnn.forward.inputs.npz", "arg");
        Zoo.Npy want = Zoo.npz("cnn.forward.expected.npz", "out").get(0);
        ByteBuffer buf = Tensor.allocateBuffer(in.get(0).data.length);
        buf.put(in.get(0).data).rewind();
        try (Model m = Model.load(Zoo.path("cnn.so")); Session s = m.newSession();
             Tensor x = Tensor.fromBuffer(buf, in.get(0).shape, "float32")) {
            try (Tensor out = s.run("forward", x)[0]) {
                Zoo.assertClose("cnn from a buffer", out, want, 1e-5, 1e-5);
            }
            buf.asFloatBuffer().put(0, 100f);
            try (Tensor out = s.run("forward", x)[0]) {
                double[] got = Zoo.values("float32", out.toRawBytes());
                double[] w = Zoo.values("float32", want.data);
                boolean differs = false;
                for (int i = 0; i < w.length; i++) {
                    differs |= Math.abs(got[i] - w[i]) > 1e-6;
                }
                org.junit.jupiter.api.Assertions.assertTrue(differs, "the run read the changed buffer");
            }
        }
    }

    /**
     * The same tensor twice in one kernel call: the kernel holds the first position alone and
     * gets a copy at the later one (README), so it runs, and writes through the later position
     * do not reach the tensor.
     */
    @Test
    void sameTensorTwiceInAKernelCall() throws Exception {
        List<Zoo.Npy> in = Zoo.npz("kernels.shift.inputs.npz", "arg");
        Zoo.Npy want = Zoo.npz("kernels.shift.expected.npz", "out").get(0);
        long shift = (long) Zoo.values(in.get(1).dtype, in.get(1).data)[0];
        Module m = Module.load(Zoo.path("kernels.so"));
        try (NDArray a = NDArray.empty(in.get(0).shape, "int32"); NDArray out = NDArray.empty(want.shape, "int32")) {
            a.copyFromRaw(in.get(0).data);
            m.getFunction("shift").pushArg(a).pushArg(shift).pushArg(out).invoke();
            Zoo.assertClose("shift", out, want, 0, 0);
            int[] before = a.asIntArray();
            m.getFunction("shift").pushArg(a).pushArg(shift).pushArg(a).invoke();
            org.junit.jupiter.api.Assertions.assertArrayEquals(before, a.asIntArray());
        } finally {
            m.release();
        }
    }
}
