package org.mote;

/** Thrown when an offloaded subgraph description is malformed or mismatched (Mote's error code {@link ErrorCode#SUBGRAPH}). */
public class SubgraphException extends MoteException {
    /** Serialization version. */
    private static final long serialVersionUID = 1L;

    /**
     * Creates the exception (Mote's native code throws it; applications rarely need to).
     *
     * @param message what went wrong, as Mote reported it
     */
    public SubgraphException(String message) {
        super(ErrorCode.SUBGRAPH, message);
    }
}
