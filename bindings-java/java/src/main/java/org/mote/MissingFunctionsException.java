package org.mote;

/** Thrown when the model calls functions nobody provides (register them with Function.register) (Mote's error code {@link ErrorCode#MISSING_FUNCTIONS}). */
public class MissingFunctionsException extends MoteException {
    /** Serialization version. */
    private static final long serialVersionUID = 1L;

    /**
     * Creates the exception (Mote's native code throws it; applications rarely need to).
     *
     * @param message what went wrong, as Mote reported it
     */
    public MissingFunctionsException(String message) {
        super(ErrorCode.MISSING_FUNCTIONS, message);
    }
}
