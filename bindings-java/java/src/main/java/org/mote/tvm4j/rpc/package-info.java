/**
 * tvm4j's RPC classes on Mote. {@link org.mote.tvm4j.rpc.Client#connect} opens an
 * {@link org.mote.tvm4j.rpc.RPCSession} with a TVM RPC server (Mote's, TVM's own, or either
 * behind a proxy) through Mote's RPC client ({@link org.mote.rpc.RemoteSession}); its
 * functions and modules are {@link org.mote.tvm4j.Function}s and {@link org.mote.tvm4j.Module}s
 * that run on the server, and its devices {@link org.mote.tvm4j.rpc.TVMRemoteDevice}s.
 * {@link org.mote.tvm4j.rpc.Server} and the {@link org.mote.tvm4j.rpc.ServerProcessor}s run
 * Mote's RPC server ({@link org.mote.rpc.Server}), which TVM's Python client drives too; as
 * TVM's server does, they serve the functions registered in this process
 * ({@link org.mote.tvm4j.Function#register}) besides the server's own.
 * Arrays made on a session's device ({@code Tensor.empty(shape, dtype, session.device("cpu"))})
 * or returned by its functions live on the server, as in tvm4j ({@link org.mote.tvm4j.Tensor}).
 */
package org.mote.tvm4j.rpc;
