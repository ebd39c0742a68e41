package org.mote;

/** Reads (and frees) a value handle a native call returned. */
final class Values {
    private Values() {}

    /**
     * The Java form of a value: null, Long, Double, Boolean, String, a Tensor (an NDArray when
     * {@code ndarray}), Object[] for tuples, long[] for shapes, {@link Pointer}, byte[] for byte
     * strings, a {@link Function} for a registered function.
     */
    static Object take(long v, boolean ndarray) {
        if (v == 0) {
            return null;
        }
        try {
            return read(v, ndarray);
        } finally {
            NativeBridge.valueFree(v);
        }
    }

    private static Object read(long v, boolean ndarray) {
        int tag = NativeBridge.valueTag(v);
        switch (tag) {
            case NativeBridge.TAG_NONE:
                return null;
            case NativeBridge.TAG_INT:
                return NativeBridge.valueLong(v);
            case NativeBridge.TAG_FLOAT:
                return NativeBridge.valueDouble(v);
            case NativeBridge.TAG_BOOL:
                return NativeBridge.valueLong(v) != 0;
            case NativeBridge.TAG_STR:
            case NativeBridge.TAG_DTYPE:
                return NativeBridge.valueDescribe(v);
            case NativeBridge.TAG_TENSOR: {
                long t = NativeBridge.valueTensor(v);
                return ndarray ? new NDArray(t) : new Tensor(t);
            }
            case NativeBridge.TAG_SHAPE:
                return NativeBridge.valueShape(v);
            case NativeBridge.TAG_POINTER:
                return new Pointer(NativeBridge.valueLong(v));
            case NativeBridge.TAG_BYTES:
                return NativeBridge.valueBytes(v);
            case NativeBridge.TAG_FUNCTION:
                return Function.named(NativeBridge.valueDescribe(v));
            case NativeBridge.TAG_TUPLE: {
                int n = NativeBridge.valueTupleSize(v);
                Object[] out = new Object[n];
                for (int i = 0; i < n; i++) {
                    out[i] = take(NativeBridge.valueTupleGet(v, i), ndarray);
                }
                return out;
            }
            default:
                throw new UnsupportedException("a " + NativeBridge.valueDescribe(v)
                        + " value cannot be passed to Java");
        }
    }

    /** The tensors of a result, tuples flattened, in order. */
    static void flatten(Object o, java.util.List<Tensor> out) {
        if (o instanceof Tensor) {
            out.add((Tensor) o);
        } else if (o instanceof Object[]) {
            for (Object x : (Object[]) o) {
                flatten(x, out);
            }
        }
    }
}
