package org.mote.tvm4j;

/**
 * tvm4j's module: a library exported by TVM (a kernel library such as the one
 * {@code tvm.build(...).export_library} writes, or a Relax executable), loaded by Mote; or a
 * module on an RPC server ({@link org.mote.tvm4j.rpc.RPCSession#loadModule}, through
 * {@link org.mote.rpc.RemoteModule}), whose functions run there. Its functions are
 * {@link Function}s; {@link #entryFunc()} is {@code main}, or the only function.
 *
 * <p>A module may be shared by threads (calls run in a bounded pool of sessions, see
 * {@link org.mote.Module}). {@link #release()} frees it (a second call does nothing); its
 * functions cannot be called afterwards ({@link IllegalStateException}). A remote module's
 * functions stay usable after it is released, until released themselves.
 */
public class Module extends TVMObject {
    /** The local module; null for a remote one. */
    private final org.mote.Module impl;
    /** The remote module; null for a local one. */
    private final org.mote.rpc.RemoteModule remote;
    private Function entry;

    Module(org.mote.Module impl) {
        super(TypeIndex.kTVMFFIModule);
        this.impl = impl;
        this.remote = null;
    }

    Module(org.mote.rpc.RemoteModule remote) {
        super(TypeIndex.kTVMFFIModule);
        this.impl = null;
        this.remote = remote;
    }

    /**
     * A module of Mote's RPC client as a tvm4j module (a Mote addition: tvm4j makes remote
     * modules itself, through {@link org.mote.tvm4j.rpc.RPCSession#loadModule}).
     * {@link #release()} frees it on the server.
     *
     * @param module the remote module
     * @return the tvm4j module wrapping it
     */
    public static Module remote(org.mote.rpc.RemoteModule module) {
        return new Module(java.util.Objects.requireNonNull(module, "module"));
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
            entry = remote != null ? getFunction("main") : new Function(impl.entryFunc(), false);
        }
        return entry;
    }

    /**
     * A function of the module.
     *
     * @param name the function's name
     * @param queryImports ignored for a local module (Mote's modules import no others); for a
     *     remote one, whether the server searches the modules it imports
     * @return the function
     * @throws org.mote.UnknownFunctionException when the module has no such function
     */
    public Function getFunction(String name, boolean queryImports) {
        if (remote != null) {
            org.mote.rpc.RemoteFunction f = remote.getFunction(name, queryImports);
            if (f == null) {
                throw new org.mote.UnknownFunctionException("no function named `" + name
                        + "` in the remote module" + (remote.name() != null ? " " + remote.name() : ""));
            }
            return new Function(f);
        }
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
     * @return {@code "library"} for a local module (every one is a loaded library),
     *     {@code "rpc"} for a remote one (as TVM names a module living on an RPC server)
     */
    public String typeKey() {
        return remote != null ? "rpc" : "library";
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
     * {@code "rpc"} when the native library has the RPC client and server (built with
     * mote-java's {@code rpc} feature: {@link org.mote.rpc.RemoteSession#isAvailable()});
     * every other target false. Options after the name ({@code "llvm -mcpu=..."}) are
     * ignored.
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
            case "rpc":
                return org.mote.rpc.RemoteSession.isAvailable();
            default:
                return false;
        }
    }

    /** Frees the module (a remote one on the server); a second call does nothing. */
    @Override
    public void release() {
        if (remote != null) {
            remote.close();
        } else {
            impl.close();
        }
    }

    /**
     * The module in Mote's idiomatic layer (the same object; closing either frees it).
     *
     * @return the module
     * @throws UnsupportedOperationException for a remote module (see {@link #remoteModule()})
     */
    public org.mote.Module moteModule() {
        if (remote != null) {
            throw new UnsupportedOperationException("the module lives on an RPC server: it has no"
                    + " local org.mote.Module (see remoteModule())");
        }
        return impl;
    }

    /**
     * The remote module in Mote's idiomatic layer (a Mote addition; the same object: closing
     * either frees it).
     *
     * @return the module, or null when this module is not remote
     */
    public org.mote.rpc.RemoteModule remoteModule() {
        return remote;
    }
}
