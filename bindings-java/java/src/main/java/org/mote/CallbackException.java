package org.mote;

/** Thrown when a registered function (a Java callback too) failed; its message is kept (Mote's error code {@link ErrorCode#CALLBACK}). */
public class CallbackException extends MoteException {
    /** Serialization version. */
    private static final long serialVersionUID = 1L;

    /**
     * Creates the exception (Mote's native code throws it; applications rarely need to).
     *
     * @param message what went wrong, as Mote reported it
     */
    public CallbackException(String message) {
        super(ErrorCode.CALLBACK, message);
    }
}
