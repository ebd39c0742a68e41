/**
 * tvm4j's API on Mote: code written for Apache TVM's Java bindings ({@code org.apache.tvm},
 * formerly {@code ml.dmlc.tvm}) runs on Mote once its imports name {@code org.mote.tvm4j}
 * instead. {@link org.mote.tvm4j.Module}, {@link org.mote.tvm4j.Function} (with
 * {@link org.mote.tvm4j.Function.Callback}), the {@link org.mote.tvm4j.TVMValue} family,
 * {@link org.mote.tvm4j.Tensor} and its pre-0.22 name {@link org.mote.tvm4j.NDArray},
 * {@link org.mote.tvm4j.TVMType}, {@link org.mote.tvm4j.Device} and the
 * {@link org.mote.tvm4j.rpc} classes keep tvm4j's signatures.
 *
 * <p>Every class here translates to the idiomatic layer ({@link org.mote.Module},
 * {@link org.mote.Function}, {@link org.mote.Tensor}, and for functions and modules on an RPC
 * server {@link org.mote.rpc.RemoteFunction} and {@link org.mote.rpc.RemoteModule}): there is
 * no second native surface.
 * Where Mote differs from TVM it says so on the member: arrays live in host memory (a
 * {@link org.mote.tvm4j.Device} other than the CPU exists only for OpenCL, and arrays are never
 * made on it), {@code release()} twice does nothing, and using a released object throws
 * {@link IllegalStateException} instead of reading freed memory.
 */
package org.mote.tvm4j;
