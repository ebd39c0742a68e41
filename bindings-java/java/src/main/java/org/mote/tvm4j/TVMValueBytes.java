package org.mote.tvm4j;

/** a byte string as a {@link TVMValue}. */
public class TVMValueBytes extends TVMValue {
    /** The value. */
    public final byte[] value;

    /**
     * Wraps a value.
     *
     * @param value the value
     */
    public TVMValueBytes(byte[] value) {
        this.value = value;
    }

    @Override
    public byte[] asBytes() {
        return value;
    }

    @Override
    public String toString() {
        return "TVMValueBytes(" + value.length + " bytes" + ")";
    }
}
