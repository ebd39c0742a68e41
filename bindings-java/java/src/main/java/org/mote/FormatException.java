package org.mote;

/** Thrown when the model's embedded data is malformed (Mote's error code {@link ErrorCode#FORMAT}). */
public class FormatException extends MoteException {
    /** Serialization version. */
    private static final long serialVersionUID = 1L;

    /**
     * Creates the exception (Mote's native code throws it; applications rarely need to).
     *
     * @param message what went wrong, as Mote reported it
     */
    public FormatException(String message) {
        super(ErrorCode.FORMAT, message);
    }
}
