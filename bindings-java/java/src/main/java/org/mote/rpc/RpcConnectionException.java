package org.mote.rpc;

import org.mote.MoteIoException;

/**
 * Thrown by the RPC client ({@link RemoteSession}) when no session could be opened (the address
 * does not resolve or refuses the connection, no server there accepts the key, it is not a TVM
 * RPC server, or it failed to start the session), or when an open session's connection broke
 * (reset, timed out, or the server's answer made no sense). After a broken connection the
 * session is closed: its later calls throw {@link IllegalStateException}.
 *
 * <p>A kind of {@link MoteIoException} (Mote's error code {@link org.mote.ErrorCode#IO}): the
 * network is I/O, and code catching Mote's I/O errors catches it.
 */
public class RpcConnectionException extends MoteIoException {
    /** Serialization version. */
    private static final long serialVersionUID = 1L;

    /**
     * Creates the exception (Mote's native code throws it; applications rarely need to).
     *
     * @param message what went wrong, naming the server's {@code host:port}
     */
    public RpcConnectionException(String message) {
        super(message);
    }
}
