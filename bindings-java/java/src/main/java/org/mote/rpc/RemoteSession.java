package org.mote.rpc;

import java.util.Objects;
import java.util.concurrent.TimeUnit;
import org.mote.UnsupportedException;

/**
 * A session with a TVM RPC server: Mote's ({@link Server}, or {@code mote-rpc} elsewhere),
 * TVM's own, or either behind a TVM RPC proxy. It looks up the server's functions, calls them,
 * moves files to and from the session's folder on the server, and loads uploaded libraries
 * there.
 *
 * <pre>{@code
 * try (RemoteSession s = RemoteSession.connect("192.168.1.20", 9090, "phone")) {
 *     s.upload("mlp.so", Files.readAllBytes(Paths.get("mlp.so")));
 *     try (RemoteModule m = s.loadModule("mlp.so");
 *          RemoteFunction f = s.getFunction("tvm.rpc.server.download")) {
 *         byte[] back = (byte[]) f.call("mlp.so");
 *     }
 * }
 * }</pre>
 *
 * <p><b>Errors.</b> A server that cannot be reached, refuses the key, or whose connection
 * breaks: {@link RpcConnectionException} (after a break the session is closed). An error the
 * server answered with: {@link RpcRemoteException}, with the server's message; the session
 * goes on. A closed session: {@link IllegalStateException}. A native library built without
 * mote-java's {@code rpc} feature (the inference library): {@link UnsupportedException}
 * (see {@link #isAvailable()}).
 *
 * <p><b>Threads.</b> Every method may be called from any thread; the requests of one session
 * (its functions' and modules' too) go to the server one at a time, in the order they come.
 *
 * <p><b>Lifetime.</b> {@link #close()} ends the session: its functions and modules then throw
 * {@link IllegalStateException} too. A session that is not closed ends once it and every
 * function and module it gave are unreachable (a backstop; close it instead).
 */
public final class RemoteSession implements AutoCloseable {
    /** The message when libmote_java has no RPC entries (built without mote-java's rpc feature). */
    static final String WITHOUT_RPC = "this libmote_java has no RPC client: it was built without"
            + " mote-java's rpc feature (the inference library). On Android depend on"
            + " org.mote:mote-android-rpc instead of org.mote:mote-android; elsewhere build it with"
            + " cargo build -p mote-java --features rpc";

    private static volatile Boolean available;

    private final NativeHandle handle;
    private final String peer;

    private RemoteSession(long h, String peer) {
        this.handle = new NativeHandle(this, "RemoteSession", h, RpcBridge::clientFree);
        this.peer = peer;
    }

    /**
     * Whether the native library has the RPC client and server: true when it was built with
     * mote-java's {@code rpc} feature (the desktop library the tests use,
     * {@code org.mote:mote-android-rpc}), false for the inference library.
     *
     * @return whether {@link #connect} and {@link Server.Builder#start()} can work
     * @throws UnsatisfiedLinkError when {@code libmote_java} cannot be loaded at all
     */
    public static boolean isAvailable() {
        Boolean a = available;
        if (a == null) {
            org.mote.Mote.load();
            try {
                a = RpcBridge.rpcAvailable();
            } catch (UnsatisfiedLinkError e) {
                a = false;
            }
            available = a;
        }
        return a;
    }

    /**
     * Connects to the RPC server (or proxy) at {@code host:port}, giving up after 10 seconds.
     *
     * @param host the server's host name or IP address
     * @param port its port
     * @param key the key the server must match ({@code ""}: any server that asks for none;
     *     through a proxy, the key of the server to reach)
     * @return the session
     * @throws RpcConnectionException when no session could be opened (the message says why)
     * @throws IllegalArgumentException when the port is out of range or the key too long
     * @throws UnsupportedException when the native library has no RPC client
     */
    public static RemoteSession connect(String host, int port, String key) {
        return connect(host, port, key, 0, TimeUnit.MILLISECONDS);
    }

    /**
     * Connects to the RPC server (or proxy) at {@code host:port}, giving up after
     * {@code timeout} (name resolution, the connection, the handshake and the server's start of
     * the session together).
     *
     * @param host the server's host name or IP address
     * @param port its port
     * @param key the key the server must match (see {@link #connect(String, int, String)})
     * @param timeout the time allowed; zero: the default, 10 seconds
     * @param unit its unit
     * @return the session
     * @throws RpcConnectionException when no session could be opened (the message says why)
     * @throws IllegalArgumentException when the port is out of range, the timeout negative or
     *     the key too long
     * @throws UnsupportedException when the native library has no RPC client
     */
    public static RemoteSession connect(String host, int port, String key, long timeout, TimeUnit unit) {
        Objects.requireNonNull(host, "host");
        Objects.requireNonNull(key, "key");
        Objects.requireNonNull(unit, "unit");
        if (port < 0 || port > 65535) {
            throw new IllegalArgumentException("port " + port + " is not 0..65535");
        }
        if (timeout < 0) {
            throw new IllegalArgumentException("timeout " + timeout + " " + unit + " is negative");
        }
        long ms = unit.toMillis(timeout);
        if (timeout > 0 && ms == 0) {
            ms = 1;
        }
        // Loaded first, so that a library that cannot load fails as it always does, and an
        // UnsatisfiedLinkError below can only be the missing RPC entries.
        org.mote.Mote.load();
        long h;
        try {
            h = RpcBridge.clientConnect(host, port, key, ms);
        } catch (UnsatisfiedLinkError e) {
            UnsupportedException u = new UnsupportedException(WITHOUT_RPC);
            u.initCause(e);
            throw u;
        }
        String p = host.indexOf(':') >= 0 ? "[" + host + "]:" + port : host + ":" + port;
        return new RemoteSession(h, p);
    }

    /**
     * The server's global function {@code name}: one of the server's own
     * ({@code tvm.rpc.server.upload}, {@code runtime.SystemLib}...) or, on a server that serves
     * them, one registered in its process.
     *
     * @param name the function's global name
     * @return the function, or null when the server has none of that name
     * @throws IllegalStateException when the session is closed
     * @throws RpcConnectionException when the connection broke
     */
    public RemoteFunction getFunction(String name) {
        Objects.requireNonNull(name, "name");
        long h = handle.acquire();
        try {
            long f = RpcBridge.clientGetFunction(h, name);
            return f == 0 ? null : new RemoteFunction(f, name);
        } finally {
            handle.release();
        }
    }

    /**
     * Writes {@code data} to the file {@code name} in the session's folder on the server
     * (replacing it).
     *
     * @param name the file's name (a relative path inside the folder)
     * @param data its bytes
     * @throws RpcRemoteException when the server refuses (a name outside the folder...)
     * @throws IllegalStateException when the session is closed
     * @throws RpcConnectionException when the connection broke
     */
    public void upload(String name, byte[] data) {
        Objects.requireNonNull(name, "name");
        Objects.requireNonNull(data, "data");
        long h = handle.acquire();
        try {
            RpcBridge.clientUpload(h, name, data);
        } finally {
            handle.release();
        }
    }

    /**
     * Reads the file {@code name} from the session's folder on the server.
     *
     * @param name the file's name
     * @return its bytes
     * @throws RpcRemoteException when the server cannot read it (no such file...)
     * @throws IllegalStateException when the session is closed
     * @throws RpcConnectionException when the connection broke
     */
    public byte[] download(String name) {
        Objects.requireNonNull(name, "name");
        long h = handle.acquire();
        try {
            return RpcBridge.clientDownload(h, name);
        } finally {
            handle.release();
        }
    }

    /**
     * Loads the uploaded library {@code name} on the server.
     *
     * @param name the file's name in the session's folder
     * @return the module, living on the server
     * @throws RpcRemoteException when the server cannot load it
     * @throws IllegalStateException when the session is closed
     * @throws RpcConnectionException when the connection broke
     */
    public RemoteModule loadModule(String name) {
        Objects.requireNonNull(name, "name");
        long h = handle.acquire();
        try {
            return new RemoteModule(RpcBridge.clientLoadModule(h, name), name);
        } finally {
            handle.release();
        }
    }

    /**
     * Whether the server has {@code device}.
     *
     * @param device the device (its type without a session mask)
     * @return whether it exists there
     * @throws IllegalStateException when the session is closed
     * @throws RpcConnectionException when the connection broke
     */
    public boolean deviceExists(RemoteDevice device) {
        Objects.requireNonNull(device, "device");
        long h = handle.acquire();
        try {
            return RpcBridge.clientDeviceExists(h, device.deviceType(), device.deviceId());
        } finally {
            handle.release();
        }
    }

    /**
     * Allocates a tensor on the server, contiguous and 64-byte aligned
     * (Mote's server zeroes it; TVM's leaves it as the allocator gave it).
     *
     * @param shape the shape (no negative extent)
     * @param dtype the element type by TVM's name ({@code "float32"}, {@code "int8"}...)
     * @param device the server's device to allocate on ({@link RemoteDevice#cpu()}, or the
     *     OpenCL device {@code new RemoteDevice(4, 0)} where the server has one)
     * @return the tensor (to close when done)
     * @throws IllegalArgumentException for an unknown type or a negative extent
     * @throws RpcRemoteException when the server refuses (no such device, too large...)
     * @throws IllegalStateException when the session is closed
     * @throws RpcConnectionException when the connection broke
     */
    public RemoteTensor empty(long[] shape, String dtype, RemoteDevice device) {
        Objects.requireNonNull(shape, "shape");
        Objects.requireNonNull(dtype, "dtype");
        Objects.requireNonNull(device, "device");
        long h = handle.acquire();
        try {
            return RemoteTensor.fromNative((long[]) RpcBridge.clientEmpty(h, shape, dtype,
                    device.deviceType(), device.deviceId()));
        } finally {
            handle.release();
        }
    }

    /**
     * The server's (or proxy's) address this session went to.
     *
     * @return {@code host:port}
     */
    public String peer() {
        return peer;
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
     * Ends the session (a request in progress on another thread finishes first): the server
     * frees everything the session holds there, and this session's functions and modules throw
     * {@link IllegalStateException} from then on. A second call does nothing.
     */
    @Override
    public void close() {
        long h;
        try {
            h = handle.acquire();
        } catch (IllegalStateException closed) {
            return;
        }
        try {
            RpcBridge.clientClose(h);
        } finally {
            handle.release();
            handle.close();
        }
    }

    @Override
    public String toString() {
        return "RemoteSession(" + peer + (isClosed() ? ", closed" : "") + ")";
    }
}
