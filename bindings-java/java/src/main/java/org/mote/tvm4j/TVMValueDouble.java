package org.mote.tvm4j;

/** a float as a {@link TVMValue}. */
public class TVMValueDouble extends TVMValue {
    /** The value. */
    public final double value;

    /**
     * Wraps a value.
     *
     * @param value the value
     */
    public TVMValueDouble(double value) {
        this.value = value;
    }

    @Override
    public double asDouble() {
        return value;
    }

    @Override
    public String toString() {
        return "TVMValueDouble(" + value + ")";
    }
}
