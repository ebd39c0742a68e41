package org.mote;

import java.util.List;

/**
 * tvm4j's {@code Module}: a loaded library whose functions are called through
 * {@link Function}. {@code Module.load("add_cpu.so").entryFunc().pushArg(a).pushArg(b)
 * .pushArg(res).invoke()} runs a kernel of a kernel-only library the way tvm4j does.
 *
 * <p><b>Threads.</b> A module may be shared by threads: each concurrent call runs in a
 * session of its own (sessions are kept and reused), so calls never wait for each other.
 */
public final class Module extends NativeObject {
    private Module(long h) {
        super("Module", h, NativeBridge::moduleFree);
    }

    /**
     * Loads a library exported by TVM (a Relax model or a kernel-only library).
     *
     * @param path the library's path
     * @return the module
     * @throws LoadException when the file is not a loadable library
     * @throws MoteIoException when the file cannot be read
     */
    public static Module load(String path) {
        return new Module(NativeBridge.moduleLoad(path));
    }

    /**
     * The functions of the module.
     *
     * @return their names
     */
    public List<String> functionNames() {
        long h = handle.acquire();
        try {
            return Model.lines(NativeBridge.moduleFunctionNames(h));
        } finally {
            handle.release();
        }
    }

    /**
     * A function of the module.
     *
     * @param name the function's name
     * @return the function
     * @throws UnknownFunctionException when the module has no such function
     */
    public Function getFunction(String name) {
        List<String> names = functionNames();
        if (!names.contains(name)) {
            throw new UnknownFunctionException("no function named `" + name + "` in the module (available: "
                    + String.join(", ", names) + ")");
        }
        return new Function(this, name);
    }

    /**
     * The entry function: {@code main} (TVM's alias for the only kernel of a one-kernel
     * library), else the only function.
     *
     * @return the function
     * @throws UnknownFunctionException when there is no single entry
     */
    public Function entryFunc() {
        List<String> names = functionNames();
        if (names.contains("main")) {
            return new Function(this, "main");
        }
        if (names.size() == 1) {
            return new Function(this, names.get(0));
        }
        throw new UnknownFunctionException("the module has no entry function (no `main`, and "
                + names.size() + " functions: " + String.join(", ", names) + ")");
    }

    /** Frees the module (tvm4j's name for {@link #close()}). */
    public void release() {
        close();
    }

    Object call(String name, Args a) {
        long h = handle.acquire();
        try {
            return Values.take(NativeBridge.moduleCall(h, name, a.tags, a.longs, a.doubles, a.strs), true);
        } finally {
            handle.release();
        }
    }
}
