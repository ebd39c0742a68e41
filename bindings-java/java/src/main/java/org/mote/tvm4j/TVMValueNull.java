package org.mote.tvm4j;

/** No value (TVM's None): what a function returning nothing, such as a kernel, returns. */
public class TVMValueNull extends TVMValue {
    /** The null value. */
    public TVMValueNull() {}

    @Override
    public String toString() {
        return "TVMValueNull";
    }
}
