package org.mote;

/** Thrown when a .npy/.npz file is malformed (Mote's error code {@link ErrorCode#NPY}). */
public class NpyException extends MoteException {
    /** Serialization version. */
    private static final long serialVersionUID = 1L;

    /**
     * Creates the exception (Mote's native code throws it; applications rarely need to).
     *
     * @param message what went wrong, as Mote reported it
     */
    public NpyException(String message) {
        super(ErrorCode.NPY, message);
    }
}
