package org.mote.tvm4j;

/**
 * tvm4j's name, before TVM 0.22, for {@link Tensor}: the same array with the same members, whose
 * factories return an {@code NDArray}.
 */
public class NDArray extends Tensor {
    NDArray(org.mote.Tensor tensor, boolean isView, Device device) {
        super(tensor, isView, device);
    }

    NDArray(org.mote.rpc.RemoteTensor remote, TVMType dtype, Device device) {
        super(remote, dtype, device);
    }

    /**
     * A new zero-filled array.
     *
     * @param shape the shape
     * @param dtype the element type
     * @param dev a CPU device, or a device of an RPC session
     * @return the array
     * @throws IllegalArgumentException when {@code dev} is neither
     */
    public static NDArray empty(long[] shape, TVMType dtype, Device dev) {
        org.mote.rpc.RemoteTensor r = allocateRemote(shape, dtype, dev);
        return r != null ? new NDArray(r, dtype, dev) : new NDArray(allocate(shape, dtype, dev), false, dev);
    }

    /**
     * A new zero-filled array on the CPU.
     *
     * @param shape the shape
     * @param dtype the element type
     * @return the array
     */
    public static NDArray empty(long[] shape, TVMType dtype) {
        return empty(shape, dtype, Device.cpu(0));
    }

    /**
     * A new zero-filled float32 array on the CPU.
     *
     * @param shape the shape
     * @return the array
     */
    public static NDArray empty(long[] shape) {
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
    public static NDArray empty(long[] shape, Device dev) {
        return empty(shape, new TVMType("float32"), dev);
    }

    @Override
    public String toString() {
        return "ND" + super.toString();
    }
}
