package org.mote;

/** Thrown when an argument has the wrong type, rank, shape or dtype (Mote's error code {@link ErrorCode#MISMATCH}). */
public class MismatchException extends MoteException {
    /** Serialization version. */
    private static final long serialVersionUID = 1L;

    /**
     * Creates the exception (Mote's native code throws it; applications rarely need to).
     *
     * @param message what went wrong, as Mote reported it
     */
    public MismatchException(String message) {
        super(ErrorCode.MISMATCH, message);
    }
}
