package org.mote;

import java.util.ArrayList;
import java.util.List;

/**
 * Java arguments encoded as NativeBridge's four parallel arrays. Tensors' handles stay acquired
 * (so nobody frees them) until {@link #release()}; a {@code byte[]} crosses as a uint8 tensor
 * made for the call (freed by {@link #release()}), a {@link Function} by its global name.
 */
final class Args {
    final int[] tags;
    final long[] longs;
    final double[] doubles;
    final String[] strs;
    private final List<Tensor> acquired = new ArrayList<>();
    private final List<Tensor> made = new ArrayList<>();

    Args(List<?> values) {
        this(values, "argument ");
    }

    /**
     * Encodes {@code values}; an error names value {@code i} as {@code what + i}, or as
     * {@code what} alone when it does not end with a space (one value: "the return value").
     */
    Args(List<?> values, String what) {
        int n = values.size();
        tags = new int[n];
        longs = new long[n];
        doubles = new double[n];
        strs = new String[n];
        try {
            for (int i = 0; i < n; i++) {
                Object v = values.get(i);
                if (v == null) {
                    tags[i] = NativeBridge.TAG_NONE;
                } else if (v instanceof Tensor) {
                    Tensor t = (Tensor) v;
                    longs[i] = t.acquireHandle();
                    acquired.add(t);
                    tags[i] = NativeBridge.TAG_TENSOR;
                } else if (v instanceof Long || v instanceof Integer || v instanceof Short || v instanceof Byte) {
                    tags[i] = NativeBridge.TAG_INT;
                    longs[i] = ((Number) v).longValue();
                } else if (v instanceof Double || v instanceof Float) {
                    tags[i] = NativeBridge.TAG_FLOAT;
                    doubles[i] = ((Number) v).doubleValue();
                } else if (v instanceof Boolean) {
                    tags[i] = NativeBridge.TAG_BOOL;
                    longs[i] = ((Boolean) v) ? 1 : 0;
                } else if (v instanceof String) {
                    tags[i] = NativeBridge.TAG_STR;
                    strs[i] = (String) v;
                } else if (v instanceof byte[]) {
                    byte[] b = (byte[]) v;
                    Tensor t = Tensor.empty(new long[] {b.length}, "uint8");
                    made.add(t);
                    t.copyFromRaw(b);
                    longs[i] = t.acquireHandle();
                    acquired.add(t);
                    tags[i] = NativeBridge.TAG_BYTES;
                } else if (v instanceof Function) {
                    tags[i] = NativeBridge.TAG_FUNCTION;
                    strs[i] = ((Function) v).globalName(what.endsWith(" ") ? what + i : what);
                } else {
                    throw new IllegalArgumentException((what.endsWith(" ") ? what + i : what)
                            + ": Mote cannot take a " + v.getClass().getName()
                            + " (use null, a number, a boolean, a String, a byte[], a Tensor or a Function)");
                }
            }
        } catch (RuntimeException e) {
            release();
            throw e;
        }
    }

    void release() {
        for (Tensor t : acquired) {
            t.releaseHandle();
        }
        acquired.clear();
        for (Tensor t : made) {
            t.close();
        }
        made.clear();
    }
}
