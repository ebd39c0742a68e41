package org.mote;

/**
 * Where a tensor lives. Mote runs on the CPU (offloaded subgraphs pick their backend per
 * session, see {@link SessionOptions#backends}), so {@link #cpu()} is the only device.
 *
 * <p><b>Threads.</b> Immutable; share it freely.
 */
public final class Device {
    private final int id;

    private Device(int id) {
        this.id = id;
    }

    /**
     * The CPU.
     *
     * @return the CPU device
     */
    public static Device cpu() {
        return new Device(0);
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
        return new Device(id);
    }

    /**
     * The device type's name.
     *
     * @return {@code "cpu"}
     */
    public String deviceType() {
        return "cpu";
    }

    /**
     * The device id.
     *
     * @return 0
     */
    public int id() {
        return id;
    }

    @Override
    public String toString() {
        return "cpu(" + id + ")";
    }
}
