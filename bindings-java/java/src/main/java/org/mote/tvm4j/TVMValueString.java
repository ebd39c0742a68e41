package org.mote.tvm4j;

/** a string as a {@link TVMValue}. */
public class TVMValueString extends TVMValue {
    /** The value. */
    public final String value;

    /**
     * Wraps a value.
     *
     * @param value the value
     */
    public TVMValueString(String value) {
        this.value = value;
    }

    @Override
    public String asString() {
        return value;
    }

    @Override
    public String toString() {
        return "TVMValueString(" + value + ")";
    }
}
