package org.mote.tvm4j;

/**
 * An opaque handle as a {@link TVMValue}: in Mote, a raw pointer a kernel passed to a
 * callback (valid during that callback only).
 */
public class TVMValueHandle extends TVMValue {
    /** The address. */
    public final long value;

    /**
     * Wraps a handle.
     *
     * @param value the address
     */
    public TVMValueHandle(long value) {
        this.value = value;
    }

    @Override
    public long asHandle() {
        return value;
    }

    @Override
    public String toString() {
        return "TVMValueHandle(0x" + Long.toHexString(value) + ")";
    }
}
