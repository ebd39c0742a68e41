package org.mote;

/**
 * tvm4j's name for a {@link Tensor}: the same object with tvm4j's factories
 * ({@code NDArray.empty(shape, dev)} is float32) and {@link #release()}. Threads: as
 * {@link Tensor}.
 */
public class NDArray extends Tensor {
    NDArray(long h) {
        super(h);
    }

    /**
     * A new zero-filled float32 array on the CPU.
     *
     * @param shape the shape
     * @return the array
     */
    public static NDArray empty(long[] shape) {
        return empty(shape, "float32", Device.cpu());
    }

    /**
     * A new zero-filled float32 array.
     *
     * @param shape the shape
     * @param device {@link Device#cpu()}
     * @return the array
     */
    public static NDArray empty(long[] shape, Device device) {
        return empty(shape, "float32", device);
    }

    /**
     * A new zero-filled array.
     *
     * @param shape the shape
     * @param dtype the element type ({@code "float32"}, {@code "int32"}...)
     * @return the array
     */
    public static NDArray empty(long[] shape, String dtype) {
        return empty(shape, dtype, Device.cpu());
    }

    /**
     * A new zero-filled array.
     *
     * @param shape the shape
     * @param dtype the element type
     * @param device {@link Device#cpu()}
     * @return the array
     */
    public static NDArray empty(long[] shape, String dtype, Device device) {
        java.util.Objects.requireNonNull(device, "device");
        if (!device.isCpu()) {
            throw new IllegalArgumentException("arrays live on the CPU, not " + device);
        }
        return new NDArray(NativeBridge.tensorEmpty(shape, dtype));
    }

    /**
     * The device the array lives on.
     *
     * @return {@link Device#cpu()}
     */
    public Device device() {
        return Device.cpu();
    }

    /** Frees the array (tvm4j's name for {@link #close()}). */
    public void release() {
        close();
    }
}
