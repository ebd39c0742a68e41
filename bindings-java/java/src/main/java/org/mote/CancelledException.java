package org.mote;

/**
 * Thrown when a call was interrupted (Mote's error code {@link ErrorCode#CANCELLED}): its
 * thread got {@link Thread#interrupt()} while the call ran, or before it started. The thread's
 * interrupt status stays set, as for any interrupted blocking call; the session (or module)
 * stays usable and its next call runs normally.
 */
public class CancelledException extends MoteException {
    /** Serialization version. */
    private static final long serialVersionUID = 1L;

    /**
     * Creates the exception (Mote's native code throws it; applications rarely need to).
     *
     * @param message what went wrong, as Mote reported it
     */
    public CancelledException(String message) {
        super(ErrorCode.CANCELLED, message);
    }
}
