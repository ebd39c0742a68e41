package org.mote;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;

/**
 * Runs a {@link Model}: holds the working memory, the thread pool its kernels use and the
 * profile.
 *
 * <p><b>Threads.</b> A session is used by one thread at a time. Calling it while another
 * thread's call runs (or from a callback of its own call) throws
 * {@link IllegalStateException} ("session in use by another thread") instead of racing;
 * give each thread its own session of the shared model.
 *
 * <p><b>Interrupts.</b> {@link #call}, {@link #run} and {@link #invokeStateful} stop when their
 * thread is interrupted ({@link Thread#interrupt()}): they throw {@link CancelledException}
 * at the next VM call or backward jump (a kernel already running finishes first) and the thread's
 * interrupt status stays set; on a thread already interrupted they throw it without running.
 * The session stays usable, and an interrupt that arrives after a call returned does not
 * cancel the next one.
 */
public final class Session extends NativeObject {
    private final Model model;
    private final boolean kernelLibrary;

    Session(Model model, long h, boolean kernelLibrary) {
        super("Session", h, NativeBridge::sessionFree);
        this.model = model;
        this.kernelLibrary = kernelLibrary;
    }

    /**
     * The model this session runs (may be closed already).
     *
     * @return the model
     */
    public Model model() {
        return model;
    }

    /**
     * The device this session runs its model's kernels on: {@link Device#cpu()} unless the
     * model was compiled for OpenCL, then the OpenCL device chosen with
     * {@link SessionOptions#openclDevice} (or the default one).
     *
     * @return the device
     */
    public Device device() {
        long h = handle.acquire();
        try {
            long[] d = NativeBridge.sessionDevice(h);
            return Device.fromDlpack((int) d[0], (int) d[1]);
        } finally {
            handle.release();
        }
    }

    /**
     * Threads available to parallel kernels.
     *
     * @return the thread count
     */
    public int threads() {
        long h = handle.acquire();
        try {
            return NativeBridge.sessionThreads(h);
        } finally {
            handle.release();
        }
    }

    /**
     * Calls a function with any arguments: tensors, numbers, booleans, strings, null. For a
     * kernel-only library the kernel writes into the output tensors passed (which must not be
     * viewed by a {@link Tensor#asByteBuffer()} meanwhile) and the result is null.
     *
     * @param function the function's name
     * @param args its arguments
     * @return the result: null, Long, Double, Boolean, String, Tensor, Object[] (tuple)...
     * @throws MoteException as Mote reports: {@link UnknownFunctionException},
     *     {@link ArgumentCountException}, {@link MismatchException}, {@link KernelException},
     *     {@link CallbackException}, {@link ResourceExhaustedException} (a budget of the
     *     {@link SessionOptions}), {@link CancelledException} (the thread was interrupted)...
     */
    public Object call(String function, Object... args) {
        Args a = new Args(Arrays.asList(args));
        try {
            long h = handle.acquire();
            try {
                return Values.take(Interruptor.call(
                        t -> NativeBridge.sessionCall(h, t, function, a.tags, a.longs, a.doubles, a.strs)), false);
            } finally {
                handle.release();
            }
        } finally {
            a.release();
        }
    }

    /**
     * Calls a function with tensors by position; returns the output tensors (tuples
     * flattened). The caller owns (and should close) the outputs.
     *
     * @param function the function's name
     * @param inputs its arguments, in order
     * @return the outputs
     * @throws InvalidArgumentException for a kernel-only library, whose kernels return nothing
     *     (they write into tensors the caller passes: use {@link #call})
     */
    public Tensor[] run(String function, Tensor... inputs) {
        if (kernelLibrary) {
            throw new InvalidArgumentException("`" + function + "`: run returns a model's outputs, but the kernels"
                    + " of a kernel-only library write into tensors the caller passes; use Session.call");
        }
        List<Tensor> out = new ArrayList<>();
        Values.flatten(call(function, (Object[]) inputs), out);
        return out.toArray(new Tensor[0]);
    }

    /**
     * Calls a function with tensors by parameter name ({@link Model#paramNames}).
     *
     * @param function the function's name
     * @param inputs every parameter's tensor by name
     * @return the outputs
     * @throws InvalidArgumentException when a name is missing or unknown
     */
    public Tensor[] run(String function, Map<String, Tensor> inputs) {
        List<String> names = model.paramNames(function);
        Tensor[] ordered = new Tensor[names.size()];
        for (int i = 0; i < ordered.length; i++) {
            ordered[i] = inputs.get(names.get(i));
            if (ordered[i] == null) {
                throw new InvalidArgumentException("`" + function + "` needs input `" + names.get(i)
                        + "` (its parameters: " + names + ")");
            }
        }
        for (String k : inputs.keySet()) {
            if (!names.contains(k)) {
                throw new InvalidArgumentException("`" + function + "` has no parameter `" + k
                        + "` (its parameters: " + names + ")");
            }
        }
        return run(function, ordered);
    }

    /**
     * Stateful API (TVM's {@code set_input}): stores the inputs of {@code function} for later
     * {@link #invokeStateful} calls. The session keeps its own references to the tensors; a
     * kernel-only library is refused ({@link InvalidArgumentException}).
     *
     * @param function the function's name
     * @param args its arguments
     * @throws ArgumentCountException when the count is wrong
     */
    public void setInput(String function, Object... args) {
        Args a = new Args(Arrays.asList(args));
        try {
            long h = handle.acquire();
            try {
                NativeBridge.sessionSetInput(h, function, a.tags, a.longs, a.doubles, a.strs);
            } finally {
                handle.release();
            }
        } finally {
            a.release();
        }
    }

    /**
     * Stateful API: runs {@code function} on the inputs given to {@link #setInput}.
     *
     * @param function the function's name
     * @throws InvalidArgumentException when no inputs were set for it
     */
    public void invokeStateful(String function) {
        long h = handle.acquire();
        try {
            Interruptor.call(t -> {
                NativeBridge.sessionInvokeStateful(h, t, function);
                return 0;
            });
        } finally {
            handle.release();
        }
    }

    /**
     * Stateful API: the result of the last {@link #invokeStateful} of {@code function}.
     *
     * @param function the function's name
     * @return as {@link #call}
     * @throws InvalidArgumentException when it was not invoked statefully
     */
    public Object getOutput(String function) {
        long h = handle.acquire();
        try {
            return Values.take(NativeBridge.sessionGetOutput(h, function), false);
        } finally {
            handle.release();
        }
    }

    /**
     * The time per callee since the session was made or since the last call of this method
     * (then reset). Empty unless {@link SessionOptions#profiling} was on.
     *
     * @return one entry per kernel, builtin or registered function called
     */
    public List<ProfileEntry> profile() {
        long h = handle.acquire();
        String text;
        try {
            text = NativeBridge.sessionProfile(h);
        } finally {
            handle.release();
        }
        List<ProfileEntry> out = new ArrayList<>();
        for (String line : Model.lines(text)) {
            String[] f = line.split("\t");
            out.add(new ProfileEntry(f[0], f[1], Long.parseLong(f[2]), Long.parseLong(f[3])));
        }
        return out;
    }
}
