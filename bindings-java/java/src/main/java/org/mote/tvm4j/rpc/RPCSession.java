package org.mote.tvm4j.rpc;

import java.io.File;
import java.io.IOException;
import org.mote.tvm4j.Device;
import org.mote.tvm4j.Function;
import org.mote.tvm4j.Module;

/**
 * tvm4j's RPC client session. Mote has no Java RPC client yet, so no session can be made
 * ({@link Client#connect} throws); the class keeps tvm4j's members so that code using it
 * compiles, and each of them throws {@link UnsupportedOperationException}.
 */
public class RPCSession {
    private RPCSession() {}

    private static UnsupportedOperationException none() {
        return new UnsupportedOperationException("Mote has no Java RPC client yet");
    }

    /**
     * A remote function.
     *
     * @param name the function's name
     * @return never
     * @throws UnsupportedOperationException always
     */
    public Function getFunction(String name) {
        throw none();
    }

    /**
     * A remote device.
     *
     * @param devType the type name
     * @param devId the index
     * @return never
     * @throws UnsupportedOperationException always
     */
    public Device device(String devType, int devId) {
        throw none();
    }

    /**
     * A remote device.
     *
     * @param devType the type name
     * @return never
     * @throws UnsupportedOperationException always
     */
    public Device device(String devType) {
        throw none();
    }

    /**
     * A remote device.
     *
     * @param devType the type code
     * @param devId the index
     * @return never
     * @throws UnsupportedOperationException always
     */
    public Device device(int devType, int devId) {
        throw none();
    }

    /**
     * A remote device.
     *
     * @param devType the type code
     * @return never
     * @throws UnsupportedOperationException always
     */
    public Device device(int devType) {
        throw none();
    }

    /**
     * The remote CPU.
     *
     * @param devId the index
     * @return never
     * @throws UnsupportedOperationException always
     */
    public Device cpu(int devId) {
        throw none();
    }

    /**
     * The remote CPU.
     *
     * @return never
     * @throws UnsupportedOperationException always
     */
    public Device cpu() {
        throw none();
    }

    /**
     * A remote CUDA device.
     *
     * @param devId the index
     * @return never
     * @throws UnsupportedOperationException always
     */
    public Device cuda(int devId) {
        throw none();
    }

    /**
     * A remote CUDA device.
     *
     * @return never
     * @throws UnsupportedOperationException always
     */
    public Device cuda() {
        throw none();
    }

    /**
     * A remote OpenCL device.
     *
     * @param devId the index
     * @return never
     * @throws UnsupportedOperationException always
     */
    public Device cl(int devId) {
        throw none();
    }

    /**
     * A remote OpenCL device.
     *
     * @return never
     * @throws UnsupportedOperationException always
     */
    public Device cl() {
        throw none();
    }

    /**
     * A remote Vulkan device.
     *
     * @param devId the index
     * @return never
     * @throws UnsupportedOperationException always
     */
    public Device vulkan(int devId) {
        throw none();
    }

    /**
     * A remote Vulkan device.
     *
     * @return never
     * @throws UnsupportedOperationException always
     */
    public Device vulkan() {
        throw none();
    }

    /**
     * A remote Metal device.
     *
     * @param devId the index
     * @return never
     * @throws UnsupportedOperationException always
     */
    public Device metal(int devId) {
        throw none();
    }

    /**
     * A remote Metal device.
     *
     * @return never
     * @throws UnsupportedOperationException always
     */
    public Device metal() {
        throw none();
    }

    /**
     * Uploads bytes to the server.
     *
     * @param data the bytes
     * @param target the remote path
     * @throws UnsupportedOperationException always
     */
    public void upload(byte[] data, String target) {
        throw none();
    }

    /**
     * Uploads a file to the server.
     *
     * @param data the file
     * @param target the remote path
     * @throws IOException never
     * @throws UnsupportedOperationException always
     */
    public void upload(File data, String target) throws IOException {
        throw none();
    }

    /**
     * Uploads a file to the server.
     *
     * @param data the file
     * @throws IOException never
     * @throws UnsupportedOperationException always
     */
    public void upload(File data) throws IOException {
        throw none();
    }

    /**
     * Downloads a file from the server.
     *
     * @param path the remote path
     * @return never
     * @throws UnsupportedOperationException always
     */
    public byte[] download(String path) {
        throw none();
    }

    /**
     * Loads an uploaded module on the server.
     *
     * @param path the remote path
     * @return never
     * @throws UnsupportedOperationException always
     */
    public Module loadModule(String path) {
        throw none();
    }
}
