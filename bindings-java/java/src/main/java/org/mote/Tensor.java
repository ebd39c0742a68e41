package org.mote;

import java.nio.Buffer;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;

/**
 * An n-dimensional array in native memory (row-major, little-endian elements, 64-byte aligned).
 *
 * <p>Data enters and leaves by copy ({@code copyFrom(float[])}, {@link #asFloatArray()}...)
 * or without a copy through direct {@link ByteBuffer}s: {@link #fromBuffer} makes a tensor
 * that <em>is</em> the buffer's memory (Mote reads inputs from it and kernels write outputs
 * into it), and {@link #asByteBuffer()} shows a tensor's memory as a buffer.
 *
 * <p><b>Alignment rule.</b> Mote's kernels need data aligned to {@link #ALIGNMENT} (64) bytes.
 * {@link #fromBuffer} takes a direct buffer of any alignment: an aligned one is wrapped without
 * a copy, an unaligned one (such as most plain {@code ByteBuffer.allocateDirect} buffers) is
 * <b>copied</b> into a tensor of Mote's own, so later writes to the buffer are not seen by
 * Mote and a kernel's writes reach the tensor, not the buffer. {@link #allocateBuffer} returns
 * aligned buffers, for zero copy.
 *
 * <p><b>Threads.</b> A tensor may be read from several threads, and passed to sessions on
 * several threads, as long as nobody writes it meanwhile: writing (copyFrom, a kernel output,
 * writes through a buffer) while another thread reads is a data race. Writing a buffer given
 * to {@link #fromBuffer} while a call that uses the tensor runs is such a race.
 */
public class Tensor extends NativeObject {
    /** The alignment, in bytes, Mote's kernels need for tensor data. */
    public static final int ALIGNMENT = 64;

    Tensor(long h) {
        super("Tensor", h, NativeBridge::tensorFree);
    }

    /**
     * A new zero-filled tensor.
     *
     * @param shape the shape
     * @param dtype {@code "float32"}, {@code "int8"}, {@code "uint8"}, {@code "float16"}...
     * @return the tensor
     */
    public static Tensor empty(long[] shape, String dtype) {
        return new Tensor(NativeBridge.tensorEmpty(shape, dtype));
    }

    /**
     * A tensor over a direct buffer's memory: without a copy when the buffer's address is
     * 64-byte aligned (the tensor then keeps the buffer reachable, Mote reads the buffer's
     * current bytes at each call and kernels write into it), else a copy of the buffer's
     * first bytes made now (see the alignment rule above). The buffer's position and limit
     * are ignored: the tensor starts at the buffer's first byte.
     *
     * @param buffer a direct buffer of at least the tensor's byte size
     * @param shape the shape
     * @param dtype the element type
     * @return the tensor
     * @throws MismatchException when the buffer is too small
     */
    public static Tensor fromBuffer(ByteBuffer buffer, long[] shape, String dtype) {
        if (!buffer.isDirect()) {
            throw new IllegalArgumentException("fromBuffer needs a direct ByteBuffer");
        }
        return new Tensor(NativeBridge.tensorFromBuffer(buffer, shape, dtype));
    }

    /**
     * A direct buffer of {@code bytes} bytes, 64-byte aligned, in native byte order: what
     * {@link #fromBuffer} wraps without a copy.
     *
     * @param bytes the capacity
     * @return the buffer
     */
    public static ByteBuffer allocateBuffer(int bytes) {
        if (bytes < 0) {
            throw new IllegalArgumentException("allocateBuffer(" + bytes + ")");
        }
        // Skip to the first aligned address (ByteBuffer.alignedSlice would do it, but Android
        // has it only from API 33). Through Buffer: ByteBuffer's covariant position(int) and
        // limit(int), which javac picks for release 11, are missing on API 24.
        ByteBuffer raw = ByteBuffer.allocateDirect(bytes + ALIGNMENT);
        long address = NativeBridge.bufferAddress(raw);
        int skip = (int) (-address & (ALIGNMENT - 1));
        ((Buffer) raw).position(skip);
        ((Buffer) raw).limit(skip + bytes);
        return raw.slice().order(ByteOrder.nativeOrder());
    }

    /**
     * A float32 tensor holding a copy of {@code data}.
     *
     * @param data the elements
     * @param shape the shape (its element count must be {@code data.length})
     * @return the tensor
     */
    public static Tensor of(float[] data, long... shape) {
        Tensor t = empty(shape, "float32");
        t.copyFrom(data);
        return t;
    }

    /**
     * An int32 tensor holding a copy of {@code data}.
     *
     * @param data the elements
     * @param shape the shape
     * @return the tensor
     */
    public static Tensor of(int[] data, long... shape) {
        Tensor t = empty(shape, "int32");
        t.copyFrom(data);
        return t;
    }

    final long acquireHandle() {
        return handle.acquire();
    }

    final void releaseHandle() {
        handle.release();
    }

    /**
     * The shape.
     *
     * @return a new array with the dimensions
     */
    public long[] shape() {
        long h = handle.acquire();
        try {
            return NativeBridge.tensorShape(h);
        } finally {
            handle.release();
        }
    }

    /**
     * The element type's name ({@code "float32"}, {@code "int8"}...).
     *
     * @return the dtype
     */
    public String dtype() {
        long h = handle.acquire();
        try {
            return NativeBridge.tensorDType(h);
        } finally {
            handle.release();
        }
    }

    /**
     * The number of elements.
     *
     * @return the product of the shape
     */
    public long size() {
        long n = 1;
        for (long d : shape()) {
            n *= d;
        }
        return n;
    }

    /**
     * The address of the first element (for checking the alignment rule; do not dereference).
     *
     * @return the address
     */
    public long address() {
        long h = handle.acquire();
        try {
            return NativeBridge.tensorAddress(h);
        } finally {
            handle.release();
        }
    }

    private void requireDType(String want, String what) {
        String have = dtype();
        if (!have.equals(want)) {
            throw new MismatchException(what + " needs a " + want + " tensor, this one is " + have);
        }
    }

    private void requireByteDType(String what) {
        String have = dtype();
        if (!have.equals("int8") && !have.equals("uint8") && !have.equals("bool")) {
            throw new MismatchException(what + " needs an int8, uint8 or bool tensor, this one is " + have);
        }
    }

    /**
     * Overwrites the tensor with the raw bytes of its elements (little-endian), any dtype.
     *
     * @param bytes exactly the tensor's byte size
     */
    public void copyFromRaw(byte[] bytes) {
        long h = handle.acquire();
        try {
            NativeBridge.tensorCopyFrom(h, bytes);
        } finally {
            handle.release();
        }
    }

    private static ByteBuffer le(int bytes) {
        return ByteBuffer.allocate(bytes).order(ByteOrder.LITTLE_ENDIAN);
    }

    /**
     * Copies {@code data} into a float32 tensor.
     *
     * @param data one value per element
     */
    public void copyFrom(float[] data) {
        requireDType("float32", "copyFrom(float[])");
        ByteBuffer b = le(data.length * 4);
        b.asFloatBuffer().put(data);
        copyFromRaw(b.array());
    }

    /**
     * Copies {@code data} into a float64 tensor.
     *
     * @param data one value per element
     */
    public void copyFrom(double[] data) {
        requireDType("float64", "copyFrom(double[])");
        ByteBuffer b = le(data.length * 8);
        b.asDoubleBuffer().put(data);
        copyFromRaw(b.array());
    }

    /**
     * Copies {@code data} into an int32 tensor.
     *
     * @param data one value per element
     */
    public void copyFrom(int[] data) {
        requireDType("int32", "copyFrom(int[])");
        ByteBuffer b = le(data.length * 4);
        b.asIntBuffer().put(data);
        copyFromRaw(b.array());
    }

    /**
     * Copies {@code data} into an int64 tensor.
     *
     * @param data one value per element
     */
    public void copyFrom(long[] data) {
        requireDType("int64", "copyFrom(long[])");
        ByteBuffer b = le(data.length * 8);
        b.asLongBuffer().put(data);
        copyFromRaw(b.array());
    }

    /**
     * Copies {@code data} into an int8, uint8 or bool tensor.
     *
     * @param data one value per element
     */
    public void copyFrom(byte[] data) {
        requireByteDType("copyFrom(byte[])");
        copyFromRaw(data);
    }

    /**
     * Copies {@code data} into an int16, uint16 or float16 tensor (float16 as raw bits).
     *
     * @param data one value per element
     */
    public void copyFrom(short[] data) {
        String have = dtype();
        if (!have.equals("int16") && !have.equals("uint16") && !have.equals("float16")) {
            throw new MismatchException("copyFrom(short[]) needs an int16, uint16 or float16 tensor, this one is " + have);
        }
        ByteBuffer b = le(data.length * 2);
        b.asShortBuffer().put(data);
        copyFromRaw(b.array());
    }

    /**
     * Copies {@code data} into a uint16 tensor (Java's {@code char} is an unsigned 16-bit
     * integer).
     *
     * @param data one value per element
     */
    public void copyFrom(char[] data) {
        requireDType("uint16", "copyFrom(char[])");
        ByteBuffer b = le(data.length * 2);
        b.asCharBuffer().put(data);
        copyFromRaw(b.array());
    }

    /**
     * A copy of the raw bytes of the elements (little-endian), any dtype.
     *
     * @return the bytes
     */
    public byte[] toRawBytes() {
        long h = handle.acquire();
        try {
            return NativeBridge.tensorToBytes(h);
        } finally {
            handle.release();
        }
    }

    private ByteBuffer rawLE() {
        return ByteBuffer.wrap(toRawBytes()).order(ByteOrder.LITTLE_ENDIAN);
    }

    /**
     * A copy of a float32 tensor's elements.
     *
     * @return the elements
     */
    public float[] asFloatArray() {
        requireDType("float32", "asFloatArray");
        java.nio.FloatBuffer b = rawLE().asFloatBuffer();
        float[] out = new float[b.remaining()];
        b.get(out);
        return out;
    }

    /**
     * A copy of a float64 tensor's elements.
     *
     * @return the elements
     */
    public double[] asDoubleArray() {
        requireDType("float64", "asDoubleArray");
        java.nio.DoubleBuffer b = rawLE().asDoubleBuffer();
        double[] out = new double[b.remaining()];
        b.get(out);
        return out;
    }

    /**
     * A copy of an int32 tensor's elements.
     *
     * @return the elements
     */
    public int[] asIntArray() {
        requireDType("int32", "asIntArray");
        java.nio.IntBuffer b = rawLE().asIntBuffer();
        int[] out = new int[b.remaining()];
        b.get(out);
        return out;
    }

    /**
     * A copy of an int64 tensor's elements.
     *
     * @return the elements
     */
    public long[] asLongArray() {
        requireDType("int64", "asLongArray");
        java.nio.LongBuffer b = rawLE().asLongBuffer();
        long[] out = new long[b.remaining()];
        b.get(out);
        return out;
    }

    /**
     * A copy of an int16, uint16 or float16 tensor's elements (float16 as raw bits).
     *
     * @return the elements
     */
    public short[] asShortArray() {
        java.nio.ShortBuffer b = rawLE().asShortBuffer();
        short[] out = new short[b.remaining()];
        b.get(out);
        return out;
    }

    /**
     * A copy of a uint16 tensor's elements.
     *
     * @return the elements
     */
    public char[] asCharArray() {
        requireDType("uint16", "asCharArray");
        java.nio.CharBuffer b = rawLE().asCharBuffer();
        char[] out = new char[b.remaining()];
        b.get(out);
        return out;
    }

    /**
     * A copy of an int8, uint8 or bool tensor's elements.
     *
     * @return the elements
     */
    public byte[] asByteArray() {
        requireByteDType("asByteArray");
        return toRawBytes();
    }

    /**
     * The tensor's memory as a direct buffer in native byte order, without a copy. The buffer
     * keeps that memory alive by itself (closing the tensor does not free it while the buffer
     * is reachable). While such a view exists the memory is shared, so kernels refuse to write
     * into this tensor and {@code copyFrom} throws {@link IllegalStateException}: write through
     * the view instead.
     *
     * @return the view
     */
    public ByteBuffer asByteBuffer() {
        long h = handle.acquire();
        try {
            long retained = NativeBridge.tensorRetain(h);
            ByteBuffer b;
            try {
                b = NativeBridge.retainedBuffer(retained);
            } catch (RuntimeException e) {
                NativeBridge.retainedFree(retained);
                throw e;
            }
            Backstop.register(b, () -> NativeBridge.retainedFree(retained));
            return b.order(ByteOrder.nativeOrder());
        } finally {
            handle.release();
        }
    }

    @Override
    public String toString() {
        if (isClosed()) {
            return "Tensor(closed)";
        }
        return "Tensor(" + java.util.Arrays.toString(shape()) + ", " + dtype() + ")";
    }
}
