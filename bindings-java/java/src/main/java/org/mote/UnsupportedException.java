package org.mote;

/** Thrown when the model uses a feature Mote does not implement (Mote's error code {@link ErrorCode#UNSUPPORTED}). */
public class UnsupportedException extends MoteException {
    /** Serialization version. */
    private static final long serialVersionUID = 1L;

    /**
     * Creates the exception (Mote's native code throws it; applications rarely need to).
     *
     * @param message what went wrong, as Mote reported it
     */
    public UnsupportedException(String message) {
        super(ErrorCode.UNSUPPORTED, message);
    }
}
