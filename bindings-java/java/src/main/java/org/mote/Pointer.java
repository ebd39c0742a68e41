package org.mote;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;

/**
 * An opaque pointer a kernel passed to a Java callback (for example the raw data pointers the
 * zoo's {@code packed} model gives {@code mote.zoo.scale_shift}). It is valid only during that
 * callback.
 *
 * <p><b>Threads.</b> Immutable; the memory it names belongs to the kernel's call.
 */
public final class Pointer {
    private final long address;

    Pointer(long address) {
        this.address = address;
    }

    /**
     * The address.
     *
     * @return the address
     */
    public long address() {
        return address;
    }

    /**
     * The memory at this address as a direct buffer in native byte order. <b>Unchecked:</b> as
     * in C, naming more bytes than the kernel's buffer holds, or using the buffer after the
     * callback returned, corrupts memory. Use only with a kernel whose contract states the size.
     *
     * @param bytes how many bytes the pointer is valid for
     * @return the buffer
     */
    public ByteBuffer asByteBuffer(long bytes) {
        return NativeBridge.pointerBuffer(address, bytes).order(ByteOrder.nativeOrder());
    }

    @Override
    public String toString() {
        return "Pointer(0x" + Long.toHexString(address) + ")";
    }
}
