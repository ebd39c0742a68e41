package org.mote.tvm4j;

/** an integer as a {@link TVMValue}. */
public class TVMValueLong extends TVMValue {
    /** The value. */
    public final long value;

    /**
     * Wraps a value.
     *
     * @param value the value
     */
    public TVMValueLong(long value) {
        this.value = value;
    }

    @Override
    public long asLong() {
        return value;
    }

    @Override
    public String toString() {
        return "TVMValueLong(" + value + ")";
    }
}
