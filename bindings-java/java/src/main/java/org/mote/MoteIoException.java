package org.mote;

/** Thrown when a file could not be read or written (Mote's error code {@link ErrorCode#IO}). */
public class MoteIoException extends MoteException {
    /** Serialization version. */
    private static final long serialVersionUID = 1L;

    /**
     * Creates the exception (Mote's native code throws it; applications rarely need to).
     *
     * @param message what went wrong, as Mote reported it
     */
    public MoteIoException(String message) {
        super(ErrorCode.IO, message);
    }
}
