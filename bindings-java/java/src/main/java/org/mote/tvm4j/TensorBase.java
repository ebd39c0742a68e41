package org.mote.tvm4j;

/**
 * The base of tvm4j's arrays: what a callback's array argument is ({@link #asTensor()}), and
 * what {@link #copyTo} copies between. Its data lives in a {@link org.mote.Tensor} in host
 * memory, or, for an array made on a {@link org.mote.tvm4j.rpc.TVMRemoteDevice} or returned by
 * a remote function, in an {@link org.mote.rpc.RemoteTensor} on the RPC server (with a host
 * array of the same size that each copy to or from it goes through, made at the first copy: an
 * array only passed from one remote function to another costs no host memory).
 */
public class TensorBase extends TVMValue {
    /**
     * Whether this object does not own its array: true for an array a callback received
     * (a copy Mote frees when the callback returns; {@link #release()} does nothing).
     */
    public final boolean isView;

    /** A local array's data; for a remote array its host array once made ({@link #host()}). */
    private org.mote.Tensor tensor;
    /** Where a remote array's data lives; null for a local array. */
    final org.mote.rpc.RemoteTensor remote;

    /** A local array. */
    TensorBase(org.mote.Tensor tensor, boolean isView) {
        this.tensor = java.util.Objects.requireNonNull(tensor, "tensor");
        this.isView = isView;
        this.remote = null;
    }

    /** A remote array (owned: released with this object). */
    TensorBase(org.mote.rpc.RemoteTensor remote) {
        this.remote = java.util.Objects.requireNonNull(remote, "remote");
        this.isView = false;
    }

    /**
     * The host array: a local array's data, a remote array's copy (made now if it was not).
     *
     * @throws IllegalStateException when the array was released
     */
    final synchronized org.mote.Tensor host() {
        if (tensor == null) {
            requireLive();
            tensor = org.mote.Tensor.empty(remote.shape(), remote.dtype());
        }
        return tensor;
    }

    private void requireLive() {
        if (remote != null && remote.isClosed()) {
            throw new IllegalStateException("the array is released");
        }
    }

    /** Before reading {@link #host()}: a remote array's data fetched into it (one request). */
    final void pull() {
        if (remote != null) {
            host().copyFromRaw(remote.toBytes());
        }
    }

    /** After writing {@link #host()}: a remote array's data sent from it (one request). */
    final void push() {
        if (remote != null) {
            remote.copyFrom(host().toRawBytes());
        }
    }

    /** The shape, without making a remote array's host array. */
    final long[] dims() {
        if (remote != null) {
            requireLive();
            return remote.shape();
        }
        return host().shape();
    }

    /** The element type's name, without making a remote array's host array. */
    final String dtypeName() {
        if (remote != null) {
            requireLive();
            return remote.dtype();
        }
        return host().dtype();
    }

    /** Whether {@link #release()} freed the array. */
    final boolean isReleased() {
        return remote != null ? remote.isClosed() : host().isClosed();
    }

    /**
     * The array as a local function's argument.
     *
     * @param what how to name it in an error
     * @throws IllegalArgumentException for a remote array
     */
    final org.mote.Tensor local(String what) {
        if (remote != null) {
            throw new IllegalArgumentException(what + ": an array on an RPC server cannot be passed"
                    + " to a local function (copyTo a local array first)");
        }
        return host();
    }

    @Override
    public TensorBase asTensor() {
        return this;
    }

    /**
     * Frees the array (unless it is a view; a remote array is freed on the server too). A
     * second call does nothing; any other use of a released array throws
     * {@link IllegalStateException}.
     */
    @Override
    public void release() {
        if (isView) {
            return;
        }
        if (remote != null) {
            remote.close();
        }
        org.mote.Tensor t;
        synchronized (this) {
            t = tensor;
        }
        if (t != null) {
            t.close();
        }
    }

    /**
     * Copies this array's elements into {@code target}, which must have the same element type
     * and shape; either may be remote (a request to its server).
     *
     * @param target the array written
     * @return {@code target}
     * @throws IllegalArgumentException when the types or shapes differ
     * @throws IllegalStateException when either array was released
     */
    public TensorBase copyTo(TensorBase target) {
        copy(this, target);
        return target;
    }

    static void copy(TensorBase from, TensorBase to) {
        String fd = from.dtypeName();
        String td = to.dtypeName();
        long[] fs = from.dims();
        long[] ts = to.dims();
        if (!fd.equals(td) || !java.util.Arrays.equals(fs, ts)) {
            throw new IllegalArgumentException("copyTo: a " + fd + " array of shape " + java.util.Arrays.toString(fs)
                    + " cannot be copied into a " + td + " array of shape " + java.util.Arrays.toString(ts));
        }
        byte[] data = from.remote != null ? from.remote.toBytes() : from.host().toRawBytes();
        if (to.remote != null) {
            to.remote.copyFrom(data);
        } else {
            to.host().copyFromRaw(data);
        }
    }

    /**
     * The array in Mote's idiomatic layer (the same memory; closing either frees it).
     *
     * @return the tensor
     * @throws UnsupportedOperationException for a remote array (see {@link #remoteTensor()})
     */
    public org.mote.Tensor moteTensor() {
        if (remote != null) {
            throw new UnsupportedOperationException("the array lives on an RPC server: see remoteTensor()");
        }
        return host();
    }

    /**
     * A remote array in Mote's idiomatic layer (the same memory on the server; closing either
     * frees it there). A Mote addition.
     *
     * @return the tensor on the server, or null for a local array
     */
    public org.mote.rpc.RemoteTensor remoteTensor() {
        return remote;
    }
}
