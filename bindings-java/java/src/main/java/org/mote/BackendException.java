package org.mote;

/** Thrown when a backend failed to load, prepare or run (Mote's error code {@link ErrorCode#BACKEND}). */
public class BackendException extends MoteException {
    /** Serialization version. */
    private static final long serialVersionUID = 1L;

    /**
     * Creates the exception (Mote's native code throws it; applications rarely need to).
     *
     * @param message what went wrong, as Mote reported it
     */
    public BackendException(String message) {
        super(ErrorCode.BACKEND, message);
    }
}
