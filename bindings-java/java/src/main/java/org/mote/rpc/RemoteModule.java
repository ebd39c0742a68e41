package org.mote.rpc;

import java.util.Objects;

/**
 * A module living on an RPC server: a library {@link RemoteSession#loadModule} loaded there,
 * or one a call returned. Its functions are {@link RemoteFunction}s.
 *
 * <p>{@link #close()} frees it on the server (functions taken from it stay usable until
 * closed themselves); a closed module, or one whose session was closed, throws
 * {@link IllegalStateException}. May be used from any thread.
 */
public final class RemoteModule implements AutoCloseable {
    final NativeHandle handle;
    private final String name;

    RemoteModule(long h, String name) {
        this.handle = new NativeHandle(this, "RemoteModule", h, RpcBridge::remoteFree);
        this.name = name;
    }

    /**
     * The file it was loaded from.
     *
     * @return the name in the session's folder, or null for a module a call returned
     */
    public String name() {
        return name;
    }

    /**
     * The function {@code name} of the module.
     *
     * @param name the function's name
     * @return the function, or null when the module has none of that name
     * @throws IllegalStateException when the module or its session is closed
     * @throws RpcRemoteException when the server fails to look it up
     * @throws RpcConnectionException when the connection broke
     */
    public RemoteFunction getFunction(String name) {
        return getFunction(name, false);
    }

    /**
     * The function {@code name} of the module, searching the modules it imports too when
     * {@code queryImports}.
     *
     * @param name the function's name
     * @param queryImports whether to search the imported modules
     * @return the function, or null when there is none of that name
     * @throws IllegalStateException when the module or its session is closed
     * @throws RpcRemoteException when the server fails to look it up
     * @throws RpcConnectionException when the connection broke
     */
    public RemoteFunction getFunction(String name, boolean queryImports) {
        Objects.requireNonNull(name, "name");
        long h = handle.acquire();
        try {
            long f = RpcBridge.remoteModuleFunction(h, name, queryImports);
            return f == 0 ? null : new RemoteFunction(f, name);
        } finally {
            handle.release();
        }
    }

    /**
     * Whether {@link #close()} was called.
     *
     * @return true once closed
     */
    public boolean isClosed() {
        return handle.isClosed();
    }

    /**
     * Frees the module on the server (once no call uses it; a request, so it may wait for one
     * of the session in progress). A second call does nothing.
     */
    @Override
    public void close() {
        handle.close();
    }

    @Override
    public String toString() {
        return "RemoteModule(" + (name != null ? name : "returned") + (isClosed() ? ", closed" : "") + ")";
    }
}
