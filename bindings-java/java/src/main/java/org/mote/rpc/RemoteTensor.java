package org.mote.rpc;

import java.util.Arrays;

/**
 * A tensor living on an RPC server: memory {@link RemoteSession#empty} allocated there (TVM's
 * {@code tvm.runtime.empty(..., device=remote.cpu())}), or a tensor a call returned. Pass it to
 * a {@link RemoteFunction} of the same session; move data with {@link #copyFrom(byte[])} and
 * {@link #toBytes()} (each one request, of the whole tensor, as raw little-endian elements).
 *
 * <pre>{@code
 * try (RemoteTensor a = s.empty(new long[] {2, 3}, "float32", RemoteDevice.cpu())) {
 *     a.copyFrom(bytes);          // 24 bytes
 *     f.call(a, out);             // runs on the server, writing out there
 *     byte[] back = out.toBytes();
 * }
 * }</pre>
 *
 * <p>The server decides what may be written: Mote's server refuses writes into a tensor a call
 * returned ({@link RpcRemoteException}; copy it into memory you allocated), TVM's allows them.
 * {@link #close()} frees it on the server (a second call does nothing); a closed tensor, or one
 * whose session was closed, throws {@link IllegalStateException}. May be used from any thread.
 */
public final class RemoteTensor implements AutoCloseable {
    final NativeHandle handle;
    private final long[] shape;
    private final String dtype;
    private final RemoteDevice device;

    private RemoteTensor(long h, long[] shape, String dtype, RemoteDevice device) {
        this.handle = new NativeHandle(this, "RemoteTensor", h, RpcBridge::tensorFree);
        this.shape = shape;
        this.dtype = dtype;
        this.device = device;
    }

    /**
     * A tensor a native call made: {@code {handle, 2, device type, device index, dims...}}.
     * The data type is asked of the native object (no request).
     */
    static RemoteTensor fromNative(long[] a) {
        long h = a[0];
        String dtype;
        try {
            dtype = RpcBridge.tensorDtype(h);
        } catch (RuntimeException | Error e) {
            RpcBridge.tensorFree(h);
            throw e;
        }
        return new RemoteTensor(h, Arrays.copyOfRange(a, 4, a.length), dtype,
                new RemoteDevice((int) a[2], (int) a[3]));
    }

    /**
     * The shape.
     *
     * @return a new array of the dimensions
     */
    public long[] shape() {
        return shape.clone();
    }

    /**
     * The element type, by TVM's name ({@code "float32"}, {@code "int8"}...).
     *
     * @return the name
     */
    public String dtype() {
        return dtype;
    }

    /**
     * The device of the server it lives on.
     *
     * @return the device
     */
    public RemoteDevice device() {
        return device;
    }

    /**
     * Overwrites the whole tensor (one request).
     *
     * @param data its raw elements, little-endian, exactly its byte size
     * @throws IllegalArgumentException when the size differs
     * @throws RpcRemoteException when the server refuses (Mote's does for a returned tensor)
     * @throws IllegalStateException when the tensor or its session is closed
     * @throws RpcConnectionException when the connection broke
     */
    public void copyFrom(byte[] data) {
        java.util.Objects.requireNonNull(data, "data");
        long h = handle.acquire();
        try {
            RpcBridge.tensorWrite(h, data);
        } finally {
            handle.release();
        }
    }

    /**
     * Reads the whole tensor (one request).
     *
     * @return its raw elements, little-endian
     * @throws IllegalArgumentException when it is too large for a byte[]
     * @throws RpcRemoteException when the server refuses
     * @throws IllegalStateException when the tensor or its session is closed
     * @throws RpcConnectionException when the connection broke
     */
    public byte[] toBytes() {
        long h = handle.acquire();
        try {
            return RpcBridge.tensorRead(h);
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
     * Frees the tensor on the server (once no call using it runs; a request, so it may wait for
     * one of the session in progress). A second call does nothing.
     */
    @Override
    public void close() {
        handle.close();
    }

    @Override
    public String toString() {
        return "RemoteTensor(" + dtype + Arrays.toString(shape) + " on " + device
                + (isClosed() ? ", closed" : "") + ")";
    }
}
