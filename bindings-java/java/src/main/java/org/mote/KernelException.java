package org.mote;

/** Thrown when a compiled kernel reported an error (its message is kept) (Mote's error code {@link ErrorCode#KERNEL}). */
public class KernelException extends MoteException {
    /** Serialization version. */
    private static final long serialVersionUID = 1L;

    /**
     * Creates the exception (Mote's native code throws it; applications rarely need to).
     *
     * @param message what went wrong, as Mote reported it
     */
    public KernelException(String message) {
        super(ErrorCode.KERNEL, message);
    }
}
