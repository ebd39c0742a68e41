package org.mote.tvm4j.rpc;

import org.mote.rpc.RemoteDevice;
import org.mote.tvm4j.Device;

/**
 * A device of the machine an RPC session's server runs on, as {@link RPCSession#device}
 * makes it: its {@link #deviceType} is the device's type plus
 * {@code (session index + 1) * }{@link RPC#RPC_SESS_MASK}, as in tvm4j. Passed to a remote
 * function it crosses without that mask. {@link #exist()} asks the server.
 */
public class TVMRemoteDevice extends Device {
    /** The session whose server has the device. */
    public final RPCSession rpcSession;

    TVMRemoteDevice(int deviceType, int deviceId, RPCSession rpcSession) {
        super(deviceType, deviceId);
        this.rpcSession = rpcSession;
    }

    /** The device's type without the session mask. */
    private int plainType() {
        return deviceType % RPC.RPC_SESS_MASK;
    }

    /**
     * Whether the server has this device (a request to it).
     *
     * @return whether it exists there
     * @throws IllegalStateException when the session is closed
     * @throws org.mote.rpc.RpcConnectionException when the connection broke
     */
    @Override
    public boolean exist() {
        return rpcSession.remoteSession().deviceExists(new RemoteDevice(plainType(), deviceId));
    }

    /**
     * The device as TVM names a remote one: {@code "remote[0]:cpu(0)"}.
     *
     * @return the name
     */
    @Override
    public String toString() {
        return "remote[" + (deviceType / RPC.RPC_SESS_MASK - 1) + "]:"
                + new Device(plainType(), deviceId);
    }
}
