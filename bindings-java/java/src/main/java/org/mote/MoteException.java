package org.mote;

/**
 * The base of every error Mote reports. Each {@link ErrorCode} has its own subclass (for
 * example {@link LoadException}, {@link KernelException}), so callers can catch exactly what
 * they handle. Misuse of an object (using it after {@code close()}, or a {@link Session} from
 * two threads at once) is not a Mote error: it throws {@link IllegalStateException}.
 */
public class MoteException extends RuntimeException {
    /** Serialization version. */
    private static final long serialVersionUID = 1L;

    /** The stable code of this exception. */
    private final ErrorCode code;

    /**
     * Creates an exception with a code.
     *
     * @param code Mote's error code
     * @param message what went wrong
     */
    protected MoteException(ErrorCode code, String message) {
        super(message);
        this.code = code;
    }

    /**
     * The stable error code of this exception.
     *
     * @return the code
     */
    public ErrorCode code() {
        return code;
    }
}
