package org.mote;

/** Thrown when wrong number of arguments (Mote's error code {@link ErrorCode#ARGUMENT_COUNT}). */
public class ArgumentCountException extends MoteException {
    /** Serialization version. */
    private static final long serialVersionUID = 1L;

    /**
     * Creates the exception (Mote's native code throws it; applications rarely need to).
     *
     * @param message what went wrong, as Mote reported it
     */
    public ArgumentCountException(String message) {
        super(ErrorCode.ARGUMENT_COUNT, message);
    }
}
