package org.mote.tvm4j;

/**
 * tvm4j's array (TVM 0.22 on; {@link NDArray} before): an n-dimensional array, made by
 * {@link #empty}, filled by {@code copyFrom} and read by {@code asXArray()}, each of which
 * requires the array's element type, as tvm4j does.
 *
 * <p>Local arrays live in host memory: {@code empty} takes a CPU {@link Device} (a model
 * compiled for OpenCL takes host arrays and copies them itself). An array made on a device of
 * an RPC session ({@link org.mote.tvm4j.rpc.RPCSession#device}, a
 * {@link org.mote.tvm4j.rpc.TVMRemoteDevice}), or returned by a remote function, lives on that
 * server, as in tvm4j: each {@code copyFrom} sends the whole array and each {@code asXArray()}
 * or {@link #internal()} fetches it (one request each, through a host array of the same size).
 * A remote array is an argument of that session's remote functions only, and a local array of
 * local functions only ({@link IllegalArgumentException} otherwise); {@link #copyTo} copies
 * between the two. {@link #release()} frees the array (on the server too); a second
 * {@code release()} does nothing, and any other use of a released array throws
 * {@link IllegalStateException}. An array never released is freed after it becomes unreachable.
 */
public class Tensor extends NDArrayBase {
    private final TVMType dtype;
    private final Device device;

    Tensor(org.mote.Tensor tensor, boolean isView, Device device) {
        super(tensor, isView);
        this.dtype = TVMType.fromMote(tensor.dtype());
        this.device = device;
    }

    Tensor(org.mote.rpc.RemoteTensor remote, TVMType dtype, Device device) {
        super(remote);
        this.dtype = dtype;
        this.device = device;
    }

    /** A local array on a CPU device. */
    static org.mote.Tensor allocate(long[] shape, TVMType dtype, Device dev) {
        if (dev.deviceType != Device.kDLCPU) {
            throw new IllegalArgumentException("Mote makes local arrays in host memory only, not on " + dev
                    + " (a model compiled for OpenCL takes host arrays and copies them itself; for an"
                    + " array on an RPC server use a device of its session, RPCSession.device(...))");
        }
        return org.mote.Tensor.empty(shape, dtype.moteName());
    }

    /** An array on the server of a session's device, or null for another device. */
    static org.mote.rpc.RemoteTensor allocateRemote(long[] shape, TVMType dtype, Device dev) {
        java.util.Objects.requireNonNull(shape, "shape");
        java.util.Objects.requireNonNull(dtype, "dtype");
        java.util.Objects.requireNonNull(dev, "dev");
        if (!(dev instanceof org.mote.tvm4j.rpc.TVMRemoteDevice)) {
            return null;
        }
        org.mote.tvm4j.rpc.TVMRemoteDevice rd = (org.mote.tvm4j.rpc.TVMRemoteDevice) dev;
        return rd.rpcSession.remoteSession().empty(shape, dtype.moteName(),
                new org.mote.rpc.RemoteDevice(dev.deviceType % org.mote.tvm4j.rpc.RPC.RPC_SESS_MASK, dev.deviceId));
    }

    /**
     * A remote function's result as an array; the tensor is freed on the server when its type
     * has no tvm4j form.
     */
    static NDArray returned(org.mote.rpc.RemoteTensor r) {
        TVMType t;
        try {
            t = TVMType.fromMote(r.dtype());
        } catch (RuntimeException e) {
            r.close();
            throw new UnsupportedOperationException("the remote function returned a " + r.dtype()
                    + " array, which has no tvm4j form", e);
        }
        // Its device on the server, without a session mask (tvm4j's would carry one).
        return new NDArray(r, t, new Device(r.device().deviceType(), r.device().deviceId()));
    }

    /**
     * A new zero-filled array.
     *
     * @param shape the shape
     * @param dtype the element type
     * @param dev a CPU device, or a device of an RPC session ({@code session.device(...)})
     * @return the array
     * @throws IllegalArgumentException when {@code dev} is neither
     * @throws org.mote.rpc.RpcRemoteException when the server refuses
     */
    public static Tensor empty(long[] shape, TVMType dtype, Device dev) {
        org.mote.rpc.RemoteTensor r = allocateRemote(shape, dtype, dev);
        return r != null ? new Tensor(r, dtype, dev) : new Tensor(allocate(shape, dtype, dev), false, dev);
    }

    /**
     * A new zero-filled array on the CPU.
     *
     * @param shape the shape
     * @param dtype the element type
     * @return the array
     */
    public static Tensor empty(long[] shape, TVMType dtype) {
        return empty(shape, dtype, Device.cpu(0));
    }

    /**
     * A new zero-filled float32 array on the CPU.
     *
     * @param shape the shape
     * @return the array
     */
    public static Tensor empty(long[] shape) {
        return empty(shape, new TVMType("float32"), Device.cpu(0));
    }

    /**
     * A new zero-filled float32 array.
     *
     * @param shape the shape
     * @param dev a CPU device, or a device of an RPC session
     * @return the array
     * @throws IllegalArgumentException when {@code dev} is neither
     */
    public static Tensor empty(long[] shape, Device dev) {
        return empty(shape, new TVMType("float32"), dev);
    }

    private void require(int code, int bits, String what) {
        if (dtype.typeCode != code || dtype.bits != bits || dtype.lanes != 1) {
            throw new IllegalArgumentException(what + " does not fit a " + dtype + " array");
        }
    }

    private void checkCopySize(int length) {
        long n = size();
        if (n != length) {
            throw new IllegalArgumentException("the array holds " + n + " elements, not " + length);
        }
    }

    /**
     * Copies {@code sourceArray} into a float64 array.
     *
     * @param sourceArray one value per element
     * @throws IllegalArgumentException when the array is not float64 or the length differs
     */
    public void copyFrom(double[] sourceArray) {
        require(TVMType.FLOAT, 64, "double[]");
        checkCopySize(sourceArray.length);
        host().copyFrom(sourceArray);
        push();
    }

    /**
     * Copies {@code sourceArray} into a float32 array.
     *
     * @param sourceArray one value per element
     * @throws IllegalArgumentException when the array is not float32 or the length differs
     */
    public void copyFrom(float[] sourceArray) {
        require(TVMType.FLOAT, 32, "float[]");
        checkCopySize(sourceArray.length);
        host().copyFrom(sourceArray);
        push();
    }

    /**
     * Copies {@code sourceArray} into an int64 array.
     *
     * @param sourceArray one value per element
     * @throws IllegalArgumentException when the array is not int64 or the length differs
     */
    public void copyFrom(long[] sourceArray) {
        require(TVMType.INT, 64, "long[]");
        checkCopySize(sourceArray.length);
        host().copyFrom(sourceArray);
        push();
    }

    /**
     * Copies {@code sourceArray} into an int32 array.
     *
     * @param sourceArray one value per element
     * @throws IllegalArgumentException when the array is not int32 or the length differs
     */
    public void copyFrom(int[] sourceArray) {
        require(TVMType.INT, 32, "int[]");
        checkCopySize(sourceArray.length);
        host().copyFrom(sourceArray);
        push();
    }

    /**
     * Copies {@code sourceArray} into an int16 array.
     *
     * @param sourceArray one value per element
     * @throws IllegalArgumentException when the array is not int16 or the length differs
     */
    public void copyFrom(short[] sourceArray) {
        require(TVMType.INT, 16, "short[]");
        checkCopySize(sourceArray.length);
        host().copyFrom(sourceArray);
        push();
    }

    /**
     * Copies {@code sourceArray} into an int8 array.
     *
     * @param sourceArray one value per element
     * @throws IllegalArgumentException when the array is not int8 or the length differs
     */
    public void copyFrom(byte[] sourceArray) {
        require(TVMType.INT, 8, "byte[]");
        checkCopySize(sourceArray.length);
        host().copyFrom(sourceArray);
        push();
    }

    /**
     * Copies {@code sourceArray} into a uint16 array.
     *
     * @param sourceArray one value per element
     * @throws IllegalArgumentException when the array is not uint16 or the length differs
     */
    public void copyFrom(char[] sourceArray) {
        require(TVMType.UINT, 16, "char[]");
        checkCopySize(sourceArray.length);
        host().copyFrom(sourceArray);
        push();
    }

    /**
     * Overwrites the array with raw element bytes (little-endian), any element type.
     *
     * @param sourceArray exactly the array's byte size
     * @throws org.mote.MismatchException when the size differs
     */
    public void copyFromRaw(byte[] sourceArray) {
        host().copyFromRaw(sourceArray);
        push();
    }

    /**
     * The shape.
     *
     * @return a new array of the dimensions
     */
    public long[] shape() {
        return dims();
    }

    /**
     * The number of elements.
     *
     * @return the product of the shape
     */
    public long size() {
        long n = 1;
        for (long d : dims()) {
            n *= d;
        }
        return n;
    }

    /**
     * A copy of a float64 array's elements (row-major).
     *
     * @return the elements
     * @throws IllegalArgumentException when the array is not float64
     */
    public double[] asDoubleArray() {
        require(TVMType.FLOAT, 64, "double[]");
        pull();
        return host().asDoubleArray();
    }

    /**
     * A copy of a float32 array's elements (row-major).
     *
     * @return the elements
     * @throws IllegalArgumentException when the array is not float32
     */
    public float[] asFloatArray() {
        require(TVMType.FLOAT, 32, "float[]");
        pull();
        return host().asFloatArray();
    }

    /**
     * A copy of an int64 array's elements (row-major).
     *
     * @return the elements
     * @throws IllegalArgumentException when the array is not int64
     */
    public long[] asLongArray() {
        require(TVMType.INT, 64, "long[]");
        pull();
        return host().asLongArray();
    }

    /**
     * A copy of an int32 array's elements (row-major).
     *
     * @return the elements
     * @throws IllegalArgumentException when the array is not int32
     */
    public int[] asIntArray() {
        require(TVMType.INT, 32, "int[]");
        pull();
        return host().asIntArray();
    }

    /**
     * A copy of an int16 array's elements (row-major).
     *
     * @return the elements
     * @throws IllegalArgumentException when the array is not int16
     */
    public short[] asShortArray() {
        require(TVMType.INT, 16, "short[]");
        pull();
        return host().asShortArray();
    }

    /**
     * A copy of a uint16 array's elements (row-major).
     *
     * @return the elements
     * @throws IllegalArgumentException when the array is not uint16
     */
    public char[] asCharArray() {
        require(TVMType.UINT, 16, "char[]");
        pull();
        return host().asCharArray();
    }

    /**
     * A copy of an int8 array's elements (row-major).
     *
     * @return the elements
     * @throws IllegalArgumentException when the array is not int8
     */
    public byte[] asByteArray() {
        require(TVMType.INT, 8, "byte[]");
        pull();
        return host().asByteArray();
    }

    /**
     * A copy of the raw element bytes (row-major, little-endian), any element type.
     *
     * @return the bytes
     */
    public byte[] internal() {
        pull();
        return host().toRawBytes();
    }

    /**
     * The device the array was made for.
     *
     * @return the device {@code empty} was given (for a remote function's result: its device on
     *     the server, without the session mask tvm4j would add)
     */
    public Device device() {
        return device;
    }

    /**
     * The element type (tvm4j keeps it private; Mote shows it).
     *
     * @return the type
     */
    public TVMType dtype() {
        return dtype;
    }

    @Override
    public String toString() {
        if (isReleased()) {
            return "Tensor(released)";
        }
        return "Tensor(" + java.util.Arrays.toString(shape()) + ", " + dtype + ", " + device + ")";
    }
}
