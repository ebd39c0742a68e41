package org.mote;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;

/**
 * A loaded model: a Relax program compiled by TVM 0.27, or a kernel-only library.
 *
 * <p><b>Threads.</b> A model is immutable and may be shared by any number of threads; each
 * thread runs it through its own {@link Session}. Closing the model while sessions exist is
 * allowed (they keep what they need).
 *
 * <pre>{@code
 * try (Model model = Model.load("mlp.so"); Session s = model.newSession()) {
 *     Tensor[] out = s.run("forward", x, w1, b1, w2, b2);
 * }
 * }</pre>
 */
public final class Model extends NativeObject {
    private Model(long h) {
        super("Model", h, NativeBridge::modelFree);
    }

    /**
     * Loads a model library ({@code .so} exported by TVM).
     *
     * @param path the library's path
     * @return the model
     * @throws LoadException when the file is not a loadable library
     * @throws MoteIoException when the file cannot be read
     */
    public static Model load(String path) {
        return new Model(NativeBridge.modelLoad(path));
    }

    /**
     * Loads a model library, as data when {@code codeFree} is true: nothing in the file is
     * mapped as code or run, only its module blob is read and validated (see
     * {@code docs/code-free.md}). The file is mapped read-only while the model lives (weights
     * only offloaded regions read stay in it): replace it by renaming, never rewrite it in place.
     * Besides a {@code .so}, a code-free load takes the {@code .tar} that
     * {@code export_library("m.tar")} writes. With {@code codeFree} false this is
     * {@link #load(String)}.
     *
     * @param path the library's path
     * @param codeFree read the file as data instead of mapping it
     * @return the model
     * @throws UnsupportedException when the program calls compiled kernels (a code-free load
     *     cannot run them; the message names them)
     * @throws FormatException when the file or its embedded data is malformed
     * @throws LoadException when the file is not a loadable library
     * @throws MoteIoException when the file cannot be read
     */
    public static Model load(String path, boolean codeFree) {
        return load(path, new LoadOptions().codeFree(codeFree));
    }

    /**
     * Loads a model with options: code-free ({@link LoadOptions#codeFree}, as
     * {@link #load(String, boolean)}), read into memory instead of mapped
     * ({@link LoadOptions#readIntoMemory}), within a memory budget
     * ({@link LoadOptions#memoryBudgetBytes}).
     *
     * @param path the file's path
     * @param options how to load it
     * @return the model
     * @throws ResourceExhaustedException when a code-free load would exceed its memory budget
     * @throws InvalidArgumentException for {@link LoadOptions#readIntoMemory} without
     *     {@link LoadOptions#codeFree}
     * @throws UnsupportedException when a code-free load meets a program that calls compiled
     *     kernels
     * @throws FormatException when the file or its embedded data is malformed
     * @throws LoadException when the file is not a loadable library
     * @throws MoteIoException when the file cannot be read
     */
    public static Model load(String path, LoadOptions options) {
        return new Model(NativeBridge.modelLoadWith(path, options.codeFree, options.readIntoMemory,
                options.memoryBudgetBytes));
    }

    /**
     * Loads a model linked into the program as a TVM "system library" (compiled with the
     * module attribute {@code system_lib_prefix}; see {@code docs/system-lib.md}). On Android
     * that means the model's objects are linked, whole, into a JNI library of the app that
     * depends on {@code libmote_java.so}; load that library first ({@code System.loadLibrary}),
     * so its constructors register the model with Mote.
     *
     * @param prefix the model's prefix, e.g. {@code "mlp_"}
     * @return the model
     * @throws LoadException when no model with that prefix is linked in (the message lists
     *     the prefixes that are)
     */
    public static Model fromSystemLib(String prefix) {
        return new Model(NativeBridge.modelFromSystemLib(prefix));
    }

    /**
     * Whether this is a kernel-only library (no Relax program): its functions are kernels
     * that write into output tensors the caller passes.
     *
     * @return true for a kernel-only library
     */
    public boolean isKernelLibrary() {
        long h = handle.acquire();
        try {
            return NativeBridge.modelIsKernelLibrary(h);
        } finally {
            handle.release();
        }
    }

    /**
     * The functions a caller can call.
     *
     * @return their names
     */
    public List<String> functionNames() {
        long h = handle.acquire();
        try {
            return lines(NativeBridge.modelFunctionNames(h));
        } finally {
            handle.release();
        }
    }

    /**
     * The parameter names of a Relax function, in order (what {@link Session#run(String,
     * java.util.Map)} matches inputs by).
     *
     * @param function the function
     * @return its parameter names
     * @throws UnknownFunctionException when there is no such function
     */
    public List<String> paramNames(String function) {
        long h = handle.acquire();
        try {
            return lines(NativeBridge.modelParamNames(h, function));
        } finally {
            handle.release();
        }
    }

    static List<String> lines(String s) {
        if (s == null || s.isEmpty()) {
            return Collections.emptyList();
        }
        return Collections.unmodifiableList(new ArrayList<>(Arrays.asList(s.split("\n", -1))));
    }

    /** {@code String.join}, which Android has only from API 26. */
    static String join(String sep, Iterable<String> parts) {
        StringBuilder b = new StringBuilder();
        boolean first = true;
        for (String p : parts) {
            if (!first) {
                b.append(sep);
            }
            first = false;
            b.append(p);
        }
        return b.toString();
    }

    /**
     * A session with default options.
     *
     * @return the session
     */
    public Session newSession() {
        return newSession(new SessionOptions());
    }

    /**
     * A session with options.
     *
     * @param options threads, backends, plug-ins, profiling, budgets
     * @return the session
     * @throws InvalidArgumentException for a bad thread count
     * @throws BackendException when a plug-in fails to load
     */
    public Session newSession(SessionOptions options) {
        for (String p : options.plugins) {
            NativeBridge.loadPlugin(p);
        }
        long h = handle.acquire();
        try {
            String backends = join(",", options.backends);
            return new Session(this, NativeBridge.sessionNew(h, options.threads, backends,
                    options.poisonMemory, options.profiling, options.budgets.clone(),
                    options.openclDevice, options.openclProfiling, options.openclProgramCache),
                    NativeBridge.modelIsKernelLibrary(h));
        } finally {
            handle.release();
        }
    }
}
