package org.mote.tvm4j;

import java.util.ArrayList;
import java.util.List;

/**
 * Translation between tvm4j's values and the idiomatic layer's Java values: those of
 * {@link org.mote.Function} for local calls, those of {@link org.mote.rpc.RemoteFunction} for
 * remote ones.
 */
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
        if (r instanceof org.mote.rpc.RemoteFunction) {
            return new Function((org.mote.rpc.RemoteFunction) r);
        }
        if (r instanceof org.mote.rpc.RemoteModule) {
            return new Module((org.mote.rpc.RemoteModule) r);
        }
        if (r instanceof org.mote.rpc.RemoteTensor) {
            return Tensor.returned((org.mote.rpc.RemoteTensor) r);
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
            return ((TensorBase) a).local(what);
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

    /**
     * A tvm4j argument of a remote function as {@link org.mote.rpc.RemoteFunction#call} takes
     * it: remote functions and modules as theirs, devices as {@link org.mote.rpc.RemoteDevice}s
     * (a {@link org.mote.tvm4j.rpc.TVMRemoteDevice}'s type without its session mask), remote
     * arrays as their {@link org.mote.rpc.RemoteTensor} (local ones are refused).
     *
     * @param what how to name it in an error
     */
    static Object toRemote(Object a, String what) {
        if (a == null || a instanceof TVMValueNull) {
            return null;
        }
        if (a instanceof Function) {
            org.mote.rpc.RemoteFunction r = ((Function) a).remoteFunction();
            if (r == null) {
                throw new IllegalArgumentException(what + ": a local function cannot be passed to a"
                        + " remote function (only remote functions of its session can)");
            }
            return r;
        }
        if (a instanceof Module) {
            org.mote.rpc.RemoteModule r = ((Module) a).remoteModule();
            if (r == null) {
                throw new IllegalArgumentException(what + ": a local module cannot be passed to a"
                        + " remote function (only remote modules of its session can)");
            }
            return r;
        }
        if (a instanceof Device) {
            Device d = (Device) a;
            int mask = org.mote.tvm4j.rpc.RPC.RPC_SESS_MASK;
            int type = d.deviceType >= mask ? d.deviceType % mask : d.deviceType;
            return new org.mote.rpc.RemoteDevice(type, d.deviceId);
        }
        if (a instanceof TVMValueHandle) {
            throw new IllegalArgumentException(what + ": a raw handle cannot be passed to a remote function");
        }
        if (a instanceof TensorBase) {
            TensorBase t = (TensorBase) a;
            if (t.remote == null) {
                throw new IllegalArgumentException(what + ": a local array cannot be passed to a remote"
                        + " function (make it with Tensor.empty(shape, dtype, session.device(...)), or"
                        + " copyTo such an array)");
            }
            return t.remote;
        }
        return toMote(a, what);
    }

    /** {@code toRemote} of each argument. */
    static Object[] toRemote(Object[] args) {
        Object[] out = new Object[args.length];
        for (int i = 0; i < args.length; i++) {
            out[i] = toRemote(args[i], "argument " + i);
        }
        return out;
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
