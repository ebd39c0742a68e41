package org.mote.rpc;

/**
 * A device of the machine an RPC server runs on, by DLPack type code ({@code 1} CPU, {@code 2}
 * CUDA, {@code 4} OpenCL...) and index: an argument of {@link RemoteFunction#call} and of
 * {@link RemoteSession#deviceExists}. Immutable.
 */
public final class RemoteDevice {
    private final int deviceType;
    private final int deviceId;

    /**
     * A device.
     *
     * @param deviceType the DLPack type code, without any session mask
     * @param deviceId the index among devices of that type
     */
    public RemoteDevice(int deviceType, int deviceId) {
        this.deviceType = deviceType;
        this.deviceId = deviceId;
    }

    /**
     * The server's CPU.
     *
     * @return CPU 0
     */
    public static RemoteDevice cpu() {
        return new RemoteDevice(1, 0);
    }

    /**
     * The DLPack type code.
     *
     * @return the code
     */
    public int deviceType() {
        return deviceType;
    }

    /**
     * The index among devices of that type.
     *
     * @return the index
     */
    public int deviceId() {
        return deviceId;
    }

    /** The two ints in one long, as the native call takes them. */
    long packed() {
        return ((long) deviceType << 32) | (deviceId & 0xffffffffL);
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof RemoteDevice && ((RemoteDevice) o).deviceType == deviceType
                && ((RemoteDevice) o).deviceId == deviceId;
    }

    @Override
    public int hashCode() {
        return deviceType * 31 + deviceId;
    }

    @Override
    public String toString() {
        return "RemoteDevice(" + deviceType + ", " + deviceId + ")";
    }
}
