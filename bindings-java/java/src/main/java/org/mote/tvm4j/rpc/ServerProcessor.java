package org.mote.tvm4j.rpc;

/**
 * tvm4j's RPC server processor: {@link #run()} serves one client session and returns, and
 * {@link #terminate()} ends it from another thread. Mote's processors
 * ({@link StandaloneServerProcessor}, {@link ConnectTrackerServerProcessor},
 * {@link ConnectProxyServerProcessor}) run Mote's server ({@link org.mote.rpc.Server}) for that
 * one session.
 */
public interface ServerProcessor extends Runnable {
    /** Ends the processor: a running {@link #run()} returns, and a later one does nothing. */
    void terminate();
}
