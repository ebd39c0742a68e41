package org.mote.tvm4j;

/**
 * A value a {@link Function} returned or a {@link Function.Callback} received. The
 * {@code asX()} accessor of the value's own kind returns it; every other one throws
 * {@link UnsupportedOperationException}.
 */
public class TVMValue {
    /** For the subclasses. */
    protected TVMValue() {}

    private UnsupportedOperationException not(String what) {
        return new UnsupportedOperationException("a " + getClass().getSimpleName() + " is not " + what);
    }

    /**
     * Frees what the value holds: a tensor, a function, a module. Plain values (numbers,
     * strings, bytes) hold nothing; for them it does nothing.
     */
    public void release() {}

    /**
     * The value as an integer (booleans are 0 or 1).
     *
     * @return the integer
     * @throws UnsupportedOperationException when the value is not an integer
     */
    public long asLong() {
        throw not("an integer");
    }

    /**
     * The value as a float.
     *
     * @return the float
     * @throws UnsupportedOperationException when the value is not a float
     */
    public double asDouble() {
        throw not("a float");
    }

    /**
     * The value as a byte string.
     *
     * @return the bytes (not copied)
     * @throws UnsupportedOperationException when the value is not a byte string
     */
    public byte[] asBytes() {
        throw not("a byte string");
    }

    /**
     * The value as a module.
     *
     * @return the module
     * @throws UnsupportedOperationException when the value is not a module
     */
    public Module asModule() {
        throw not("a Module");
    }

    /**
     * The value as a function.
     *
     * @return the function
     * @throws UnsupportedOperationException when the value is not a function
     */
    public Function asFunction() {
        throw not("a Function");
    }

    /**
     * The value as an array (TVM 0.22 on).
     *
     * @return the array
     * @throws UnsupportedOperationException when the value is not an array
     */
    public TensorBase asTensor() {
        throw not("a Tensor");
    }

    /**
     * The value as an array (tvm4j's name before TVM 0.22).
     *
     * @return the array
     * @throws UnsupportedOperationException when the value is not an array
     */
    public NDArrayBase asNDArray() {
        throw not("an NDArray");
    }

    /**
     * The value as a string.
     *
     * @return the string
     * @throws UnsupportedOperationException when the value is not a string
     */
    public String asString() {
        throw not("a string");
    }

    /**
     * The value as an opaque handle.
     *
     * @return the handle
     * @throws UnsupportedOperationException when the value is not a handle
     */
    long asHandle() {
        throw not("a handle");
    }
}
