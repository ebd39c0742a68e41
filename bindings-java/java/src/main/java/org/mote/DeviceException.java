package org.mote;

/**
 * Thrown when a device failed or is missing (Mote's error code {@link ErrorCode#DEVICE}): no
 * {@code libOpenCL} or no OpenCL device where a model compiled for OpenCL needs one, a program
 * the driver rejects (its build log is in the message), or an allocation, copy or launch the
 * driver refuses. The message names the device ({@code opencl}, or {@code opencl:N} for device
 * N); see docs/opencl.md.
 */
public class DeviceException extends MoteException {
    /** Serialization version. */
    private static final long serialVersionUID = 1L;

    /**
     * Creates the exception (Mote's native code throws it; applications rarely need to).
     *
     * @param message what went wrong, as Mote reported it
     */
    public DeviceException(String message) {
        super(ErrorCode.DEVICE, message);
    }
}
