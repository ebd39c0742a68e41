package org.mote;

import java.util.ArrayList;
import java.util.List;

/**
 * Java arguments encoded as NativeBridge's four parallel arrays. Tensors' handles stay acquired
 * (so nobody frees them) until {@link #release()}.
 */
final class Args {
    final int[] tags;
    final long[] longs;
    final double[] doubles;
    final String[] strs;
    private final List<Tensor> acquired = new ArrayList<>();

    Args(List<?> values) {
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
                } else {
                    throw new IllegalArgumentException("argument " + i + ": Mote cannot take a "
                            + v.getClass().getName() + " (use null, a number, a boolean, a String or a Tensor)");
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
    }
}
