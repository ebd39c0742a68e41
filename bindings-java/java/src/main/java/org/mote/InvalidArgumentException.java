package org.mote;

/** Thrown when a caller-supplied value is invalid (bad option, misaligned buffer...) (Mote's error code {@link ErrorCode#INVALID_ARGUMENT}). */
public class InvalidArgumentException extends MoteException {
    /** Serialization version. */
    private static final long serialVersionUID = 1L;

    /**
     * Creates the exception (Mote's native code throws it; applications rarely need to).
     *
     * @param message what went wrong, as Mote reported it
     */
    public InvalidArgumentException(String message) {
        super(ErrorCode.INVALID_ARGUMENT, message);
    }
}
