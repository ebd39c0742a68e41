package org.mote.tvm4j;

import java.util.HashMap;
import java.util.Map;

/**
 * A device, by DLPack's type code and an index: {@code new Device("cpu", 0)},
 * {@link #cpu()}, {@link #opencl()}... Any device can be named; {@link #exist()} says whether
 * Mote runs on it here: the CPU always, an OpenCL device when OpenCL lists it
 * ({@link org.mote.Mote#openclStatus()}), nothing else (Mote has no CUDA, Vulkan, Metal,
 * VPI, ROCm or Hexagon runtime).
 *
 * <p>Immutable; share it freely.
 */
public class Device {
    static final int kDLCPU = 1;
    static final int kDLCUDA = 2;
    static final int kDLCUDAHost = 3;
    static final int kDLOpenCL = 4;
    static final int kDLVulkan = 7;
    static final int kDLMetal = 8;
    static final int kDLVPI = 9;
    static final int kDLROCM = 10;
    static final int kDLROCMHost = 11;
    static final int kDLExtDev = 12;
    static final int kDLCUDAManaged = 13;
    static final int kDLOneAPI = 14;
    static final int kDLWebGPU = 15;
    static final int kDLHexagon = 16;

    private static final Map<String, Integer> TYPES = new HashMap<>();
    private static final Map<Integer, String> NAMES = new HashMap<>();

    static {
        name("cpu", kDLCPU);
        name("cuda", kDLCUDA);
        name("opencl", kDLOpenCL);
        TYPES.put("cl", kDLOpenCL);
        name("vulkan", kDLVulkan);
        name("metal", kDLMetal);
        name("vpi", kDLVPI);
        name("rocm", kDLROCM);
        name("webgpu", kDLWebGPU);
        name("hexagon", kDLHexagon);
    }

    private static void name(String n, int type) {
        TYPES.put(n, type);
        NAMES.put(type, n);
    }

    /** DLPack's device type code ({@code 1} CPU, {@code 2} CUDA, {@code 4} OpenCL...). */
    public final int deviceType;
    /** The index among devices of that type. */
    public final int deviceId;

    /**
     * A device by DLPack type code.
     *
     * @param deviceType the type code
     * @param deviceId the index
     */
    public Device(int deviceType, int deviceId) {
        this.deviceType = deviceType;
        this.deviceId = deviceId;
    }

    /**
     * A device by type name: {@code "cpu"}, {@code "cuda"}, {@code "opencl"} (or {@code "cl"}),
     * {@code "vulkan"}, {@code "metal"}, {@code "vpi"}, {@code "rocm"}, {@code "webgpu"},
     * {@code "hexagon"}.
     *
     * @param deviceType the type name
     * @param deviceId the index
     * @throws IllegalArgumentException for another name
     */
    public Device(String deviceType, int deviceId) {
        this(typeOf(deviceType), deviceId);
    }

    private static int typeOf(String name) {
        Integer t = TYPES.get(name);
        if (t == null) {
            throw new IllegalArgumentException("unknown device type `" + name + "` (known: " + TYPES.keySet() + ")");
        }
        return t;
    }

    /**
     * CPU {@code devId}.
     *
     * @param devId the index
     * @return the device
     */
    public static Device cpu(int devId) {
        return new Device(kDLCPU, devId);
    }

    /**
     * The CPU.
     *
     * @return CPU 0
     */
    public static Device cpu() {
        return cpu(0);
    }

    /**
     * CUDA GPU {@code devId} (never exists in Mote).
     *
     * @param devId the index
     * @return the device
     */
    public static Device cuda(int devId) {
        return new Device(kDLCUDA, devId);
    }

    /**
     * CUDA GPU 0 (never exists in Mote).
     *
     * @return the device
     */
    public static Device cuda() {
        return cuda(0);
    }

    /**
     * OpenCL device {@code devId} (an index into the devices OpenCL lists).
     *
     * @param devId the index
     * @return the device
     */
    public static Device opencl(int devId) {
        return new Device(kDLOpenCL, devId);
    }

    /**
     * OpenCL device 0.
     *
     * @return the device
     */
    public static Device opencl() {
        return opencl(0);
    }

    /**
     * Vulkan device {@code devId} (never exists in Mote).
     *
     * @param devId the index
     * @return the device
     */
    public static Device vulkan(int devId) {
        return new Device(kDLVulkan, devId);
    }

    /**
     * Vulkan device 0 (never exists in Mote).
     *
     * @return the device
     */
    public static Device vulkan() {
        return vulkan(0);
    }

    /**
     * Metal device {@code devId} (never exists in Mote).
     *
     * @param devId the index
     * @return the device
     */
    public static Device metal(int devId) {
        return new Device(kDLMetal, devId);
    }

    /**
     * Metal device 0 (never exists in Mote).
     *
     * @return the device
     */
    public static Device metal() {
        return metal(0);
    }

    /**
     * VPI simulator device {@code devId} (never exists in Mote).
     *
     * @param devId the index
     * @return the device
     */
    public static Device vpi(int devId) {
        return new Device(kDLVPI, devId);
    }

    /**
     * VPI simulator device 0 (never exists in Mote).
     *
     * @return the device
     */
    public static Device vpi() {
        return vpi(0);
    }

    /**
     * Hexagon device {@code devId} (never exists in Mote).
     *
     * @param devId the index
     * @return the device
     */
    public static Device hexagon(int devId) {
        return new Device(kDLHexagon, devId);
    }

    /**
     * Hexagon device 0 (never exists in Mote).
     *
     * @return the device
     */
    public static Device hexagon() {
        return hexagon(0);
    }

    /**
     * Whether Mote can run on this device here: true for the CPU, true for an OpenCL device
     * whose index OpenCL lists, false for every other device.
     *
     * @return whether it exists
     */
    public boolean exist() {
        if (deviceType == kDLCPU) {
            return deviceId >= 0;
        }
        if (deviceType == kDLOpenCL) {
            return deviceId >= 0 && deviceId < openclDevices();
        }
        return false;
    }

    /** How many devices OpenCL lists, from Mote's OpenCL status line. */
    static int openclDevices() {
        String status = org.mote.Mote.openclStatus();
        if (!status.startsWith("OpenCL: ") || status.startsWith("OpenCL: none")) {
            return 0;
        }
        int n = 0;
        int at = 0;
        while (true) {
            String item = (n == 0 ? "OpenCL: " : ", ") + n + ": ";
            int i = status.indexOf(item, at);
            if (i < 0) {
                return n;
            }
            at = i + item.length();
            n++;
        }
    }

    /**
     * The most threads a block may have: Mote reports no such attribute.
     *
     * @return never
     * @throws UnsupportedOperationException always
     */
    public long maxThreadsPerBlock() {
        throw new UnsupportedOperationException("Mote reports no maxThreadsPerBlock for " + this);
    }

    /**
     * The warp size: Mote reports no such attribute.
     *
     * @return never
     * @throws UnsupportedOperationException always
     */
    public long warpSize() {
        throw new UnsupportedOperationException("Mote reports no warpSize for " + this);
    }

    /**
     * Waits until the device's work is done: Mote's calls return when their work is done, so
     * there is nothing to wait for.
     *
     * @throws UnsupportedOperationException when the device does not {@link #exist()}
     */
    public void sync() {
        if (!exist()) {
            throw new UnsupportedOperationException("Mote has no device " + this);
        }
    }

    @Override
    public int hashCode() {
        return (deviceType << 16) | deviceId;
    }

    @Override
    public boolean equals(Object other) {
        return other instanceof Device && ((Device) other).deviceType == deviceType
                && ((Device) other).deviceId == deviceId;
    }

    /**
     * The device as {@code "cpu(0)"}, {@code "opencl(1)"}...
     *
     * @return the name
     */
    @Override
    public String toString() {
        String n = NAMES.get(deviceType);
        return (n != null ? n : "device" + deviceType) + "(" + deviceId + ")";
    }
}
