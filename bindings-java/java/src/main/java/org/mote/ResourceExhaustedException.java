package org.mote;

/**
 * Thrown when a budget of the load or session options would be exceeded (Mote's error code
 * {@link ErrorCode#RESOURCE_EXHAUSTED}): a call ran more instructions than
 * {@link SessionOptions#maxInstructions}, held more registers, stack or memory than its
 * budgets allow, or a code-free load would inflate a file beyond
 * {@link LoadOptions#memoryBudgetBytes}. The message names the budget. The session stays
 * usable.
 */
public class ResourceExhaustedException extends MoteException {
    /** Serialization version. */
    private static final long serialVersionUID = 1L;

    /**
     * Creates the exception (Mote's native code throws it; applications rarely need to).
     *
     * @param message what went wrong, as Mote reported it
     */
    public ResourceExhaustedException(String message) {
        super(ErrorCode.RESOURCE_EXHAUSTED, message);
    }
}
