package org.mote.tvm4j;

/**
 * The common base of {@link Function} and {@link Module}, as in tvm4j. In Mote it holds no
 * native handle of its own: each subclass wraps an object of the idiomatic layer.
 */
public class TVMObject extends TVMValue {
    /** The object's kind, a {@link TypeIndex} constant. */
    public final int typeIndex;

    TVMObject(int typeIndex) {
        this.typeIndex = typeIndex;
    }
}
