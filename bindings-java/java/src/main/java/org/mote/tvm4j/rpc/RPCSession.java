package org.mote.tvm4j.rpc;

import java.io.File;
import java.io.FileInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.lang.ref.WeakReference;
import java.util.ArrayList;
import java.util.List;
import org.mote.UnknownFunctionException;
import org.mote.rpc.RemoteFunction;
import org.mote.rpc.RemoteSession;
import org.mote.tvm4j.Device;
import org.mote.tvm4j.Function;
import org.mote.tvm4j.Module;

/**
 * tvm4j's RPC client session ({@link Client#connect}), over Mote's {@link RemoteSession}: the
 * server's functions ({@link #getFunction}), files in the session's folder there
 * ({@link #upload}, {@link #download}), libraries loaded there ({@link #loadModule}) and its
 * devices ({@link #device}). Errors the server answers with are
 * {@link org.mote.rpc.RpcRemoteException}s carrying its message; a broken connection is an
 * {@link org.mote.rpc.RpcConnectionException}.
 *
 * <p>As in tvm4j, each session has an index in a table of this process's sessions (the lowest
 * free one: a session's index is free again once it is closed or unreachable), which
 * {@link #device} encodes into the device type. Also as in tvm4j, {@link #cpu()},
 * {@link #cl()} and the like return plain devices (the same as {@link Device#cpu()}...), not
 * {@link TVMRemoteDevice}s; use {@link #device} for those.
 *
 * <p>tvm4j's session has no {@code close()}: it ends when it and everything it gave are
 * unreachable. With Mote, {@link #remoteSession()}{@code .close()} ends it at once.
 */
public class RPCSession {
    /** The sessions by table index; a cleared or closed entry is free. */
    private static final List<WeakReference<RPCSession>> TABLE = new ArrayList<>();

    private final RemoteSession session;
    private final int tblIndex;

    RPCSession(RemoteSession session) {
        this.session = session;
        this.tblIndex = enter(this);
    }

    private static int enter(RPCSession s) {
        synchronized (TABLE) {
            for (int i = 0; i < TABLE.size(); i++) {
                RPCSession old = TABLE.get(i).get();
                if (old == null || old.session.isClosed()) {
                    TABLE.set(i, new WeakReference<>(s));
                    return i;
                }
            }
            TABLE.add(new WeakReference<>(s));
            return TABLE.size() - 1;
        }
    }

    /**
     * The server's global function {@code name} (one of the server's own, such as
     * {@code tvm.rpc.server.upload}, or one registered in the server's process when the server
     * serves them, as {@link Server} does).
     *
     * @param name the function's global name
     * @return the function, running on the server
     * @throws UnknownFunctionException when the server has no function of that name
     */
    public Function getFunction(String name) {
        RemoteFunction f = session.getFunction(name);
        if (f == null) {
            throw new UnknownFunctionException("the RPC server " + session.peer()
                    + " has no function named `" + name + "`");
        }
        return Function.remote(f);
    }

    /**
     * A device of the server, by type name.
     *
     * @param devType {@code "cpu"}, {@code "cuda"}, {@code "opencl"} (or {@code "cl"})...
     * @param devId the index
     * @return the device, its type encoded with this session's index
     * @throws IllegalArgumentException for an unknown type name
     */
    public Device device(String devType, int devId) {
        return device(new Device(devType, devId).deviceType, devId);
    }

    /**
     * Device 0 of a type of the server, by type name.
     *
     * @param devType the type name
     * @return the device, its type encoded with this session's index
     * @throws IllegalArgumentException for an unknown type name
     */
    public Device device(String devType) {
        return device(devType, 0);
    }

    /**
     * A device of the server, by DLPack type code.
     *
     * @param devType the type code
     * @param devId the index
     * @return the device, its type encoded with this session's index
     */
    public Device device(int devType, int devId) {
        int encode = (tblIndex + 1) * RPC.RPC_SESS_MASK;
        return new TVMRemoteDevice(devType + encode, devId, this);
    }

    /**
     * Device 0 of a type of the server, by DLPack type code.
     *
     * @param devType the type code
     * @return the device, its type encoded with this session's index
     */
    public Device device(int devType) {
        return device(devType, 0);
    }

    /**
     * CPU {@code devId}, as tvm4j gives it: a plain device ({@link Device#cpu(int)}).
     *
     * @param devId the index
     * @return the device
     */
    public Device cpu(int devId) {
        return Device.cpu(devId);
    }

    /**
     * CPU 0, as tvm4j gives it: a plain device.
     *
     * @return the device
     */
    public Device cpu() {
        return cpu(0);
    }

    /**
     * CUDA device {@code devId}, as tvm4j gives it: a plain device.
     *
     * @param devId the index
     * @return the device
     */
    public Device cuda(int devId) {
        return Device.cuda(devId);
    }

    /**
     * CUDA device 0, as tvm4j gives it: a plain device.
     *
     * @return the device
     */
    public Device cuda() {
        return cuda(0);
    }

    /**
     * OpenCL device {@code devId}, as tvm4j gives it: a plain device.
     *
     * @param devId the index
     * @return the device
     */
    public Device cl(int devId) {
        return Device.opencl(devId);
    }

    /**
     * OpenCL device 0, as tvm4j gives it: a plain device.
     *
     * @return the device
     */
    public Device cl() {
        return cl(0);
    }

    /**
     * Vulkan device {@code devId}, as tvm4j gives it: a plain device.
     *
     * @param devId the index
     * @return the device
     */
    public Device vulkan(int devId) {
        return Device.vulkan(devId);
    }

    /**
     * Vulkan device 0, as tvm4j gives it: a plain device.
     *
     * @return the device
     */
    public Device vulkan() {
        return vulkan(0);
    }

    /**
     * Metal device {@code devId}, as tvm4j gives it: a plain device.
     *
     * @param devId the index
     * @return the device
     */
    public Device metal(int devId) {
        return Device.metal(devId);
    }

    /**
     * Metal device 0, as tvm4j gives it: a plain device.
     *
     * @return the device
     */
    public Device metal() {
        return metal(0);
    }

    /**
     * Writes bytes to a file in the session's folder on the server.
     *
     * @param data the bytes
     * @param target the file's name there
     * @throws IllegalArgumentException when {@code target} is null
     * @throws org.mote.rpc.RpcRemoteException when the server refuses
     */
    public void upload(byte[] data, String target) {
        if (target == null) {
            throw new IllegalArgumentException("the upload target (the remote file name) is null");
        }
        session.upload(target, data);
    }

    /**
     * Writes a local file to a file in the session's folder on the server.
     *
     * @param data the local file
     * @param target the file's name there
     * @throws IOException when the local file cannot be read
     * @throws org.mote.rpc.RpcRemoteException when the server refuses
     */
    public void upload(File data, String target) throws IOException {
        upload(readAll(data), target);
    }

    /**
     * Writes a local file to the session's folder on the server, under its own name.
     *
     * @param data the local file
     * @throws IOException when the local file cannot be read
     * @throws org.mote.rpc.RpcRemoteException when the server refuses
     */
    public void upload(File data) throws IOException {
        upload(data, data.getName());
    }

    /**
     * Reads a file of the session's folder on the server.
     *
     * @param path the file's name there
     * @return its bytes
     * @throws org.mote.rpc.RpcRemoteException when the server cannot read it
     */
    public byte[] download(String path) {
        return session.download(path);
    }

    /**
     * Loads an uploaded library on the server.
     *
     * @param path the file's name in the session's folder
     * @return the module, living on the server
     * @throws org.mote.rpc.RpcRemoteException when the server cannot load it
     */
    public Module loadModule(String path) {
        return Module.remote(session.loadModule(path));
    }

    /**
     * The session in Mote's idiomatic layer (a Mote addition), to close it or use it directly.
     *
     * @return the session
     */
    public RemoteSession remoteSession() {
        return session;
    }

    @Override
    public String toString() {
        return "RPCSession(" + session.peer() + ", index " + tblIndex + ")";
    }

    private static byte[] readAll(File file) throws IOException {
        long length = file.length();
        if (length > Integer.MAX_VALUE - 8) {
            throw new IOException(file + " is too large to upload at once (" + length + " bytes)");
        }
        java.io.ByteArrayOutputStream out = new java.io.ByteArrayOutputStream((int) length);
        try (InputStream in = new FileInputStream(file)) {
            byte[] buf = new byte[64 * 1024];
            int n;
            while ((n = in.read(buf)) >= 0) {
                out.write(buf, 0, n);
            }
        }
        return out.toByteArray();
    }
}
