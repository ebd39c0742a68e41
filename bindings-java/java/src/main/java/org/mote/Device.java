package org.mote;

/**
 * Where a session runs, or where a tensor lives. Arrays ({@link NDArray}, {@link Tensor}) are
 * always on the CPU ({@link #cpu()}; offloaded subgraphs pick their backend per session, see
 * {@link SessionOptions#backends}). A session of a model compiled for OpenCL runs on an OpenCL
 * device ({@link Session#device()}: {@code opencl(N)}, N an index into the devices OpenCL
 * lists), copying host arrays in and out itself.
 *
 * <p><b>Threads.</b> Immutable; share it freely.
 */
public final class Device {
    /** DLPack's device type codes: kDLCPU, kDLOpenCL. */
    static final int DL_CPU = 1;
    static final int DL_OPENCL = 4;

    private final int type;
    private final int id;

    private Device(int type, int id) {
        this.type = type;
        this.id = id;
    }

    /** The device of DLPack's {@code (deviceType, deviceId)}, as the natives return it. */
    static Device fromDlpack(int deviceType, int deviceId) {
        if (deviceType != DL_CPU && deviceType != DL_OPENCL) {
            throw new IllegalStateException("unknown DLPack device type " + deviceType);
        }
        return new Device(deviceType, deviceId);
    }

    /**
     * The CPU.
     *
     * @return the CPU device
     */
    public static Device cpu() {
        return new Device(DL_CPU, 0);
    }

    /**
     * The CPU; the id is kept for tvm4j compatibility and must be 0.
     *
     * @param id device id (0)
     * @return the CPU device
     */
    public static Device cpu(int id) {
        if (id != 0) {
            throw new IllegalArgumentException("Mote has one CPU device, id 0");
        }
        return new Device(DL_CPU, id);
    }

    /**
     * The device type's name.
     *
     * @return {@code "cpu"} or {@code "opencl"}
     */
    public String deviceType() {
        return type == DL_OPENCL ? "opencl" : "cpu";
    }

    /**
     * DLPack's device type code.
     *
     * @return 1 (CPU) or 4 (OpenCL)
     */
    public int dlpackType() {
        return type;
    }

    /**
     * Whether this is the CPU.
     *
     * @return true for {@link #cpu()}
     */
    public boolean isCpu() {
        return type == DL_CPU;
    }

    /**
     * The device id: 0 for the CPU, the OpenCL device index for an OpenCL device.
     *
     * @return the id
     */
    public int id() {
        return id;
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof Device && ((Device) o).type == type && ((Device) o).id == id;
    }

    @Override
    public int hashCode() {
        return type * 31 + id;
    }

    @Override
    public String toString() {
        return deviceType() + "(" + id + ")";
    }
}
