package org.mote.tvm4j;

/**
 * tvm4j's module: a library exported by TVM (a kernel library such as the one
 * {@code tvm.build(...).export_library} writes, or a Relax executable), loaded by Mote. Its
 * functions are {@link Function}s; {@link #entryFunc()} is {@code main}, or the only function.
 *
 * <p>A module may be shared by threads (calls run in a bounded pool of sessions, see
 * {@link org.mote.Module}). {@link #release()} frees it (a second call does nothing); its
 * functions cannot be called afterwards ({@link IllegalStateException}).
 */
public class Module extends TVMObject {
    private final org.mote.Module impl;
    private Function entry;

    Module(org.mote.Module impl) {
        super(TypeIndex.kTVMFFIModule);
        this.impl = impl;
    }

    @Override
    public Module asModule() {
        return this;
    }

    /**
     * The entry function: {@code main} (TVM's name for the only kernel of a one-kernel
     * library), else the only function. The same object at each call.
     *
     * @return the function
     * @throws org.mote.UnknownFunctionException when there is no single entry
     */
    public synchronized Function entryFunc() {
        if (entry == null) {
            entry = new Function(impl.entryFunc(), false);
        }
        return entry;
    }

    /**
     * A function of the module.
     *
     * @param name the function's name
     * @param queryImports ignored: Mote's modules import no others
     * @return the function
     * @throws org.mote.UnknownFunctionException when the module has no such function
     */
    public Function getFunction(String name, boolean queryImports) {
        return new Function(impl.getFunction(name), false);
    }

    /**
     * A function of the module.
     *
     * @param name the function's name
     * @return the function
     * @throws org.mote.UnknownFunctionException when the module has no such function
     */
    public Function getFunction(String name) {
        return getFunction(name, false);
    }

    /**
     * Importing modules into others: not in Mote.
     *
     * @param module the module
     * @throws UnsupportedOperationException always
     */
    public void importModule(Module module) {
        throw new UnsupportedOperationException("Mote's modules do not import other modules");
    }

    /**
     * The module's kind.
     *
     * @return {@code "library"}: every Mote module is a loaded library
     */
    public String typeKey() {
        return "library";
    }

    /**
     * Loads a library exported by TVM ({@code .so}, or the {@code .tar} {@code export_library}
     * writes).
     *
     * @param path the file
     * @param fmt ignored: Mote finds the format from the file itself
     * @return the module
     * @throws org.mote.LoadException when the file is not a loadable library
     * @throws org.mote.MoteIoException when the file cannot be read
     */
    public static Module load(String path, String fmt) {
        return new Module(org.mote.Module.load(path));
    }

    /**
     * Loads a library exported by TVM.
     *
     * @param path the file
     * @return the module
     * @throws org.mote.LoadException when the file is not a loadable library
     * @throws org.mote.MoteIoException when the file cannot be read
     */
    public static Module load(String path) {
        return load(path, "");
    }

    /**
     * Whether Mote runs code built for {@code target} here: {@code "cpu"}, {@code "llvm"} and
     * {@code "c"} (host code) always; {@code "opencl"}/{@code "cl"} when OpenCL lists a device;
     * {@code "rpc"} false (Mote has an RPC server, {@link org.mote.tvm4j.rpc.Server}, but no
     * Java RPC client); every other target false. Options after the name
     * ({@code "llvm -mcpu=..."}) are ignored.
     *
     * @param target the target's name
     * @return whether it is enabled
     */
    public static boolean enabled(String target) {
        String t = target.trim();
        int space = t.indexOf(' ');
        if (space >= 0) {
            t = t.substring(0, space);
        }
        switch (t) {
            case "cpu":
            case "llvm":
            case "c":
                return true;
            case "opencl":
            case "cl":
                return Device.openclDevices() > 0;
            default:
                return false;
        }
    }

    /** Frees the module; a second call does nothing. */
    @Override
    public void release() {
        impl.close();
    }

    /**
     * The module in Mote's idiomatic layer (the same object; closing either frees it).
     *
     * @return the module
     */
    public org.mote.Module moteModule() {
        return impl;
    }
}
