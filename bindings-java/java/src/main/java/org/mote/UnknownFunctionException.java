package org.mote;

/** Thrown when no function of that name (Mote's error code {@link ErrorCode#UNKNOWN_FUNCTION}). */
public class UnknownFunctionException extends MoteException {
    /** Serialization version. */
    private static final long serialVersionUID = 1L;

    /**
     * Creates the exception (Mote's native code throws it; applications rarely need to).
     *
     * @param message what went wrong, as Mote reported it
     */
    public UnknownFunctionException(String message) {
        super(ErrorCode.UNKNOWN_FUNCTION, message);
    }
}
