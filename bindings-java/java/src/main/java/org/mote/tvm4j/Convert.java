package org.mote.tvm4j;

import java.util.ArrayList;
import java.util.List;

/** Translation between tvm4j's values and the idiomatic layer's Java values. */
final class Convert {
    private Convert() {}

    /** A result of the idiomatic layer as a tvm4j value (arrays and functions owned by it). */
    static TVMValue result(Object r) {
        return value(r, false);
    }

    /**
     * A value of the idiomatic layer as a tvm4j value; {@code view}: a callback's argument,
     * whose array Mote frees when the callback returns.
     */
    static TVMValue value(Object r, boolean view) {
        if (r == null) {
            return new TVMValueNull();
        }
        if (r instanceof Long) {
            return new TVMValueLong((Long) r);
        }
        if (r instanceof Boolean) {
            return new TVMValueLong((Boolean) r ? 1 : 0);
        }
        if (r instanceof Double) {
            return new TVMValueDouble((Double) r);
        }
        if (r instanceof String) {
            return new TVMValueString((String) r);
        }
        if (r instanceof byte[]) {
            return new TVMValueBytes((byte[]) r);
        }
        if (r instanceof org.mote.Tensor) {
            return new NDArray((org.mote.Tensor) r, view, Device.cpu(0));
        }
        if (r instanceof org.mote.Function) {
            return new Function((org.mote.Function) r, false);
        }
        if (r instanceof org.mote.Pointer) {
            return new TVMValueHandle(((org.mote.Pointer) r).address());
        }
        if (!view) {
            closeTensors(r);
        }
        String what = r instanceof Object[] ? "a tuple" : r instanceof long[] ? "a shape" : "a " + r.getClass().getName();
        throw new UnsupportedOperationException("tvm4j has no value for " + what
                + "; call the function through org.mote.Module or org.mote.Session instead");
    }

    private static void closeTensors(Object r) {
        if (r instanceof org.mote.Tensor) {
            ((org.mote.Tensor) r).close();
        } else if (r instanceof Object[]) {
            for (Object o : (Object[]) r) {
                closeTensors(o);
            }
        }
    }

    /** A callback's arguments as tvm4j values. */
    static TVMValue[] arguments(Object[] args) {
        TVMValue[] out = new TVMValue[args.length];
        for (int i = 0; i < args.length; i++) {
            out[i] = value(args[i], true);
        }
        return out;
    }

    /**
     * A tvm4j argument (or a callback's return value) as the idiomatic layer takes it.
     *
     * @param what how to name it in an error
     */
    static Object toMote(Object a, String what) {
        if (a == null || a instanceof TVMValueNull) {
            return null;
        }
        if (a instanceof TensorBase) {
            return ((TensorBase) a).tensor;
        }
        if (a instanceof Function) {
            return ((Function) a).mote();
        }
        if (a instanceof Integer || a instanceof Long || a instanceof Short || a instanceof Byte) {
            return ((Number) a).longValue();
        }
        if (a instanceof Float || a instanceof Double) {
            return ((Number) a).doubleValue();
        }
        if (a instanceof Boolean || a instanceof String || a instanceof byte[]) {
            return a;
        }
        if (a instanceof TVMValueLong) {
            return ((TVMValueLong) a).value;
        }
        if (a instanceof TVMValueDouble) {
            return ((TVMValueDouble) a).value;
        }
        if (a instanceof TVMValueString) {
            return ((TVMValueString) a).value;
        }
        if (a instanceof TVMValueBytes) {
            return ((TVMValueBytes) a).value;
        }
        if (a instanceof Module || a instanceof Device || a instanceof TVMValueHandle) {
            throw new IllegalArgumentException(what + ": Mote cannot pass a " + a.getClass().getSimpleName()
                    + " to a function (numbers, strings, byte[], arrays and functions only)");
        }
        throw new IllegalArgumentException(what + ": invalid argument " + a + " (a " + a.getClass().getName() + ")");
    }

    /** {@code toMote} of each argument. */
    static Object[] toMote(Object[] args) {
        List<Object> out = new ArrayList<>(args.length);
        for (int i = 0; i < args.length; i++) {
            out.add(toMote(args[i], "argument " + i));
        }
        return out.toArray();
    }
}
