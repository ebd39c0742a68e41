package org.mote;

/** Thrown when memory could not be allocated (Mote's error code {@link ErrorCode#OUT_OF_MEMORY}). */
public class MoteOutOfMemoryException extends MoteException {
    /** Serialization version. */
    private static final long serialVersionUID = 1L;

    /**
     * Creates the exception (Mote's native code throws it; applications rarely need to).
     *
     * @param message what went wrong, as Mote reported it
     */
    public MoteOutOfMemoryException(String message) {
        super(ErrorCode.OUT_OF_MEMORY, message);
    }
}
