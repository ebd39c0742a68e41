package org.mote;

/** Thrown when a session was re-entered while running (Mote's error code {@link ErrorCode#BUSY}). */
public class BusyException extends MoteException {
    /** Serialization version. */
    private static final long serialVersionUID = 1L;

    /**
     * Creates the exception (Mote's native code throws it; applications rarely need to).
     *
     * @param message what went wrong, as Mote reported it
     */
    public BusyException(String message) {
        super(ErrorCode.BUSY, message);
    }
}
