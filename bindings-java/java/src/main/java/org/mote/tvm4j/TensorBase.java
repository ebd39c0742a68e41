package org.mote.tvm4j;

/**
 * The base of tvm4j's arrays: what a callback's array argument is ({@link #asTensor()}), and
 * what {@link #copyTo} copies between. Its data lives in a {@link org.mote.Tensor} in host
 * memory.
 */
public class TensorBase extends TVMValue {
    /**
     * Whether this object does not own its array: true for an array a callback received
     * (a copy Mote frees when the callback returns; {@link #release()} does nothing).
     */
    public final boolean isView;

    final org.mote.Tensor tensor;

    TensorBase(org.mote.Tensor tensor, boolean isView) {
        this.tensor = tensor;
        this.isView = isView;
    }

    @Override
    public TensorBase asTensor() {
        return this;
    }

    /**
     * Frees the array (unless it is a view). A second call does nothing; any other use of a
     * released array throws {@link IllegalStateException}.
     */
    @Override
    public void release() {
        if (!isView) {
            tensor.close();
        }
    }

    /**
     * Copies this array's elements into {@code target}, which must have the same element type
     * and shape.
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
        String fd = from.tensor.dtype();
        String td = to.tensor.dtype();
        long[] fs = from.tensor.shape();
        long[] ts = to.tensor.shape();
        if (!fd.equals(td) || !java.util.Arrays.equals(fs, ts)) {
            throw new IllegalArgumentException("copyTo: a " + fd + " array of shape " + java.util.Arrays.toString(fs)
                    + " cannot be copied into a " + td + " array of shape " + java.util.Arrays.toString(ts));
        }
        to.tensor.copyFromRaw(from.tensor.toRawBytes());
    }

    /**
     * The array in Mote's idiomatic layer (the same memory; closing either frees it).
     *
     * @return the tensor
     */
    public org.mote.Tensor moteTensor() {
        return tensor;
    }
}
