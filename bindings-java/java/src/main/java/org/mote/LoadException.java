package org.mote;

/** Thrown when the system loader refused the model library (Mote's error code {@link ErrorCode#LOAD}). */
public class LoadException extends MoteException {
    /** Serialization version. */
    private static final long serialVersionUID = 1L;

    /**
     * Creates the exception (Mote's native code throws it; applications rarely need to).
     *
     * @param message what went wrong, as Mote reported it
     */
    public LoadException(String message) {
        super(ErrorCode.LOAD, message);
    }
}
