package org.mote.rpc;

import java.util.ArrayList;
import java.util.List;
import org.mote.UnsupportedException;

/**
 * A function living on an RPC server, from {@link RemoteSession#getFunction},
 * {@link RemoteModule#getFunction} or a call's result. {@link #call} runs it there.
 *
 * <p>{@link #close()} frees it on the server (a second call does nothing); a closed function,
 * or one whose session was closed, throws {@link IllegalStateException}. Calls may come from
 * any thread (they reach the server one at a time per session).
 */
public final class RemoteFunction implements AutoCloseable {
    final NativeHandle handle;
    private final String name;

    RemoteFunction(long h, String name) {
        this.handle = new NativeHandle(this, "RemoteFunction", h, RpcBridge::remoteFree);
        this.name = name;
    }

    /**
     * A reference a native call returned: {@code {handle, 0}} for a function,
     * {@code {handle, 1}} for a module, {@code {handle, 2, ...}} for a tensor
     * ({@link RemoteTensor#fromNative}); any other object as it is.
     */
    static Object wrap(Object r) {
        if (r instanceof long[]) {
            long[] a = (long[]) r;
            if (a[1] == 2) {
                return RemoteTensor.fromNative(a);
            }
            return a[1] == 0 ? new RemoteFunction(a[0], null) : new RemoteModule(a[0], null);
        }
        return r;
    }

    /**
     * The name it was looked up by.
     *
     * @return the name, or null for a function a call returned
     */
    public String name() {
        return name;
    }

    /**
     * Calls the function on the server.
     *
     * @param args null, integers (Long, Integer, Short, Byte), floats (Double, Float),
     *     Booleans, Strings, byte[]s, {@link RemoteFunction}s, {@link RemoteModule}s and
     *     {@link RemoteTensor}s of the same session, {@link RemoteDevice}s
     * @return what it returned: null, Long, Double, Boolean, String (a string, or a data
     *     type's name such as {@code "float32"}), byte[], a {@link RemoteFunction}, a
     *     {@link RemoteModule} or a {@link RemoteTensor} (to close when done)
     * @throws RpcRemoteException when the function failed on the server (the session goes on)
     * @throws UnsupportedException when it returned an object the Java client cannot receive
     *     (a tuple, a shape...; the server frees it), or a local {@link org.mote.Tensor} is
     *     passed
     * @throws IllegalArgumentException for another argument, or a remote object of another
     *     session
     * @throws IllegalStateException when the function, an argument or the session is closed
     * @throws RpcConnectionException when the connection broke
     */
    public Object call(Object... args) {
        // One kind letter per argument, its payload in longs, doubles or objects at the same
        // index: the encoding of mote-java's rpc_client.rs (module `kind`).
        int n = args.length;
        StringBuilder kinds = new StringBuilder(n);
        long[] longs = new long[n];
        double[] doubles = new double[n];
        Object[] objects = new Object[n];
        List<NativeHandle> acquired = new ArrayList<>();
        long h = handle.acquire();
        try {
            for (int i = 0; i < n; i++) {
                Object v = args[i];
                if (v == null) {
                    kinds.append('n');
                } else if (v instanceof Long || v instanceof Integer || v instanceof Short || v instanceof Byte) {
                    kinds.append('i');
                    longs[i] = ((Number) v).longValue();
                } else if (v instanceof Double || v instanceof Float) {
                    kinds.append('f');
                    doubles[i] = ((Number) v).doubleValue();
                } else if (v instanceof Boolean) {
                    kinds.append('b');
                    longs[i] = (Boolean) v ? 1 : 0;
                } else if (v instanceof String) {
                    kinds.append('s');
                    objects[i] = v;
                } else if (v instanceof byte[]) {
                    kinds.append('y');
                    objects[i] = v;
                } else if (v instanceof RemoteFunction || v instanceof RemoteModule) {
                    NativeHandle r = v instanceof RemoteFunction
                            ? ((RemoteFunction) v).handle : ((RemoteModule) v).handle;
                    longs[i] = r.acquire();
                    acquired.add(r);
                    kinds.append('r');
                } else if (v instanceof RemoteTensor) {
                    NativeHandle r = ((RemoteTensor) v).handle;
                    longs[i] = r.acquire();
                    acquired.add(r);
                    kinds.append('t');
                } else if (v instanceof RemoteDevice) {
                    kinds.append('d');
                    longs[i] = ((RemoteDevice) v).packed();
                } else if (v instanceof org.mote.Tensor) {
                    throw new UnsupportedException("argument " + i + ": a local Tensor cannot be"
                            + " passed to a remote function (make a RemoteTensor with"
                            + " RemoteSession.empty and copy the data into it)");
                } else {
                    throw new IllegalArgumentException("argument " + i + ": a remote function cannot"
                            + " take a " + v.getClass().getName() + " (use null, a number, a boolean, a"
                            + " String, a byte[], a RemoteFunction, a RemoteModule, a RemoteTensor or a"
                            + " RemoteDevice)");
                }
            }
            return wrap(RpcBridge.remoteCall(h, kinds.toString(), longs, doubles, objects));
        } finally {
            for (NativeHandle r : acquired) {
                r.release();
            }
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
     * Frees the function on the server (once no call of it runs; a request, so it may wait for
     * one of the session in progress). A second call does nothing.
     */
    @Override
    public void close() {
        handle.close();
    }

    @Override
    public String toString() {
        return "RemoteFunction(" + (name != null ? name : "returned") + (isClosed() ? ", closed" : "") + ")";
    }
}
