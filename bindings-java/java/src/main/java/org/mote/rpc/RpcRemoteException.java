package org.mote.rpc;

import org.mote.CallbackException;

/**
 * Thrown by the RPC client when the server answered a request with an error: the function it
 * ran (a remote function, or one of the server's own such as
 * {@code tvm.rpc.server.download}) failed there. The message is the server's text, unchanged.
 * The session goes on: later calls work.
 *
 * <p>A kind of {@link CallbackException} (Mote's error code
 * {@link org.mote.ErrorCode#CALLBACK}): as for a registered function, Mote did not run the
 * failing code and keeps its message.
 */
public class RpcRemoteException extends CallbackException {
    /** Serialization version. */
    private static final long serialVersionUID = 1L;

    /**
     * Creates the exception (Mote's native code throws it; applications rarely need to).
     *
     * @param message the server's error message
     */
    public RpcRemoteException(String message) {
        super(message);
    }
}
