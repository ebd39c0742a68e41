/**
 * tvm4j's RPC classes on Mote. {@link org.mote.tvm4j.rpc.Server} and the
 * {@link org.mote.tvm4j.rpc.ServerProcessor}s run Mote's RPC server
 * ({@link org.mote.rpc.Server}), which TVM's Python client drives. Mote has no Java RPC
 * client yet: {@link org.mote.tvm4j.rpc.Client#connect} throws
 * {@link UnsupportedOperationException}, and {@link org.mote.tvm4j.rpc.RPCSession} exists for
 * source compatibility only.
 */
package org.mote.tvm4j.rpc;
