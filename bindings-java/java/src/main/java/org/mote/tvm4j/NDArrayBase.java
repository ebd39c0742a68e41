package org.mote.tvm4j;

/**
 * tvm4j's name, before TVM 0.22, for {@link TensorBase}: every array is one, so code written
 * for either name works.
 */
public class NDArrayBase extends TensorBase {
    NDArrayBase(org.mote.Tensor tensor, boolean isView) {
        super(tensor, isView);
    }

    NDArrayBase(org.mote.rpc.RemoteTensor remote) {
        super(remote);
    }

    @Override
    public NDArrayBase asNDArray() {
        return this;
    }

    /**
     * Copies this array's elements into {@code target} (same element type and shape).
     *
     * @param target the array written
     * @return {@code target}
     * @throws IllegalArgumentException when the types or shapes differ
     * @throws IllegalStateException when either array was released
     */
    public NDArrayBase copyTo(NDArrayBase target) {
        copy(this, target);
        return target;
    }
}
