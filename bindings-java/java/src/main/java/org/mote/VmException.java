package org.mote;

/** Thrown when the VM hit a state well-formed bytecode cannot produce (Mote's error code {@link ErrorCode#VM}). */
public class VmException extends MoteException {
    /** Serialization version. */
    private static final long serialVersionUID = 1L;

    /**
     * Creates the exception (Mote's native code throws it; applications rarely need to).
     *
     * @param message what went wrong, as Mote reported it
     */
    public VmException(String message) {
        super(ErrorCode.VM, message);
    }
}
