package org.mote.rpc;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.File;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.mote.UnknownFunctionException;
import org.mote.Zoo;
import org.mote.tvm4j.Device;
import org.mote.tvm4j.Function;
import org.mote.tvm4j.Module;
import org.mote.tvm4j.NDArray;
import org.mote.tvm4j.TVMType;
import org.mote.tvm4j.Tensor;
import org.mote.tvm4j.TensorBase;
import org.mote.tvm4j.TVMValue;
import org.mote.tvm4j.TVMValueNull;
import org.mote.tvm4j.rpc.Client;
import org.mote.tvm4j.rpc.RPC;
import org.mote.tvm4j.rpc.RPCSession;
import org.mote.tvm4j.rpc.Server;
import org.mote.tvm4j.rpc.TVMRemoteDevice;

/**
 * tvm4j's RPC client ({@code org.mote.tvm4j.rpc.Client}, {@code RPCSession},
 * {@code TVMRemoteDevice}) the way tvm4j's own RPCTest drives it (Java functions registered in
 * this process, served by tvm4j's {@link Server} in this process, called through a session;
 * the same through TVM's Python proxy under the key {@code x1}), and the rest of the session's
 * API. Written for Mote; tvm4j's RPCTest itself is @Ignore'd upstream.
 */
class Tvm4jClientTest {
    /** tvm4j's test helper's way: the first port of a range the server can bind. */
    static Server startServer(int[] portOut) throws IOException {
        IOException last = null;
        for (int i = 0; i < 10; i++) {
            int port = RpcServerTest.freePort();
            try {
                Server s = new Server(port);
                s.start();
                portOut[0] = port;
                return s;
            } catch (IOException e) {
                last = e;
            }
        }
        throw last;
    }

    static void close(RPCSession s) {
        if (s != null) {
            s.remoteSession().close();
        }
    }

    /** What a test does with a session. */
    interface SessionBody {
        void run(RPCSession s) throws Exception;
    }

    /** Runs {@code body} with a session of tvm4j's server started for it; closes both. */
    static void withSession(SessionBody body) throws Exception {
        int[] port = new int[1];
        Server server = startServer(port);
        RPCSession s = null;
        try {
            s = Client.connect("127.0.0.1", port[0]);
            body.run(s);
        } finally {
            close(s);
            server.terminate();
        }
    }

    @Test
    void rpcIsEnabled() {
        assertTrue(Module.enabled("rpc"));
        assertTrue(Module.enabled("cpu"));
        assertFalse(Module.enabled("cuda"));
    }

    @Test
    void addOne() throws Exception {
        Function.register("test.rpc.addone", new Function.Callback() {
            @Override
            public Object invoke(TVMValue... args) {
                return args[0].asLong() + 1L;
            }
        });
        int[] port = new int[1];
        Server server = null;
        RPCSession client = null;
        try {
            server = startServer(port);
            client = Client.connect("127.0.0.1", port[0]);
            Function func = client.getFunction("test.rpc.addone");
            assertEquals(11L, func.call(10).asLong());
            assertEquals(11L, func.pushArg(10).invoke().asLong());
            assertEquals(-1L, func.pushArg(-2L).invoke().asLong());
            // A remote function has no local org.mote.Function.
            assertTrue(func.remoteFunction() != null);
            assertThrows(UnsupportedOperationException.class, func::moteFunction);
        } finally {
            close(client);
            if (server != null) {
                server.terminate();
            }
            org.mote.Function.unregister("test.rpc.addone");
        }
    }

    @Test
    void strcat() throws Exception {
        Function.register("test.rpc.strcat", new Function.Callback() {
            @Override
            public Object invoke(TVMValue... args) {
                return args[0].asString() + ":" + args[1].asLong();
            }
        });
        int[] port = new int[1];
        Server server = null;
        RPCSession client = null;
        try {
            server = startServer(port);
            client = Client.connect("127.0.0.1", port[0]);
            Function func = client.getFunction("test.rpc.strcat");
            assertEquals("abc:11", func.call("abc", 11L).asString());
            assertEquals("x:3", func.pushArg("x").pushArg(3).invoke().asString());
            func.release();
            func.release();
            Function released = func;
            assertThrows(IllegalStateException.class, () -> released.call("abc", 11L));
        } finally {
            close(client);
            if (server != null) {
                server.terminate();
            }
            org.mote.Function.unregister("test.rpc.strcat");
        }
    }

    @Test
    void throughTvmsProxyWithAKey() throws Exception {
        Function.register("test.rpc.proxy.addone", new Function.Callback() {
            @Override
            public Object invoke(TVMValue... args) {
                return args[0].asLong() + 1L;
            }
        });
        int proxyPort = RpcServerTest.freePort();
        Server server = null;
        RPCSession client = null;
        try (RpcServerTest.Py proxy = new RpcServerTest.Py("-m", "tvm.exec.rpc_proxy", "--host",
                "127.0.0.1", "--port", Integer.toString(proxyPort), "--port-end",
                Integer.toString(proxyPort + 1), "--web-port", "0")) {
            RpcServerTest.until("the proxy listens on " + proxyPort, 20, () -> {
                assertTrue(proxy.process.isAlive(), () -> "the proxy exited:\n" + proxy.output());
                return RpcServerTest.accepts(proxyPort);
            });
            server = new Server("127.0.0.1", proxyPort, "x1");
            server.start();
            Server s = server;
            RpcServerTest.until("the server waits at the proxy", 20,
                    () -> s.moteServer().state().proxyWaiting());
            client = Client.connect("127.0.0.1", proxyPort, "x1");
            Function f1 = client.getFunction("test.rpc.proxy.addone");
            assertEquals(11L, f1.call(10L).asLong());
        } finally {
            close(client);
            if (server != null) {
                server.terminate();
            }
            org.mote.Function.unregister("test.rpc.proxy.addone");
        }
    }

    @Test
    void remoteDevicesEncodeTheSessionIndex() throws Exception {
        int[] port = new int[1];
        Server server = startServer(port);
        RPCSession a = null;
        RPCSession b = null;
        RPCSession c = null;
        try {
            a = Client.connect("127.0.0.1", port[0]);
            b = Client.connect("127.0.0.1", port[0]);
            Device da = a.device("cpu", 0);
            assertTrue(da instanceof TVMRemoteDevice, da.toString());
            assertSame(a, ((TVMRemoteDevice) da).rpcSession);
            int index = da.deviceType / RPC.RPC_SESS_MASK - 1;
            assertTrue(index >= 0, "index " + index);
            assertEquals(1 + (index + 1) * RPC.RPC_SESS_MASK, da.deviceType);
            assertEquals(0, da.deviceId);
            assertEquals(da, a.device("cpu"));
            assertEquals(da, a.device(1, 0));
            assertEquals(da, a.device(1));
            assertEquals(4 + (index + 1) * RPC.RPC_SESS_MASK, a.device("opencl", 2).deviceType);
            assertEquals(2, a.device("cl", 2).deviceId);
            assertEquals("remote[" + index + "]:cpu(0)", da.toString());
            // Another open session has another index.
            int other = b.device("cpu").deviceType / RPC.RPC_SESS_MASK - 1;
            assertNotEquals(index, other);
            // exist() asks the server.
            assertTrue(da.exist());
            assertFalse(a.device("cuda", 0).exist());
            da.sync();
            // As in tvm4j, cpu() and the like are plain devices.
            assertEquals(Device.cpu(0), a.cpu());
            assertFalse(a.cpu() instanceof TVMRemoteDevice);
            assertEquals(Device.opencl(1), a.cl(1));
            assertEquals(Device.cuda(0), a.cuda());
            assertEquals(Device.vulkan(0), a.vulkan());
            assertEquals(Device.metal(0), a.metal());
            // A closed session's index is free again (the lowest free one is taken).
            close(a);
            c = Client.connect("127.0.0.1", port[0]);
            assertEquals(index, c.device("cpu").deviceType / RPC.RPC_SESS_MASK - 1);
            assertTrue(c.device("cpu").exist());
            // A remote device crosses to a remote function without its mask: the server names
            // the device it received when it refuses it as a registered function's argument.
            Function.register("test.rpc.device", args -> 0L);
            try {
                RPCSession cs = c;
                RpcRemoteException e = assertThrows(RpcRemoteException.class,
                        () -> cs.getFunction("test.rpc.device").call(cs.device("cpu", 0)));
                assertTrue(e.getMessage().contains("(1, 0)"), e.getMessage());
            } finally {
                org.mote.Function.unregister("test.rpc.device");
            }
        } finally {
            close(a);
            close(b);
            close(c);
            server.terminate();
        }
    }

    @Test
    void filesModulesAndErrors(@TempDir Path tmp) throws Exception {
        withSession(s -> {
            byte[] data = {1, 2, 3, 4};
            s.upload(data, "d.bin");
            assertArrayEquals(data, s.download("d.bin"));
            assertThrows(IllegalArgumentException.class, () -> s.upload(data, null));
            File so = Paths.get(RpcServerTest.zoo(), "mlp.so").toFile();
            s.upload(so);
            assertArrayEquals(Files.readAllBytes(so.toPath()), s.download("mlp.so"));
            File local = tmp.resolve("local.bin").toFile();
            Files.write(local.toPath(), new byte[] {9, 8});
            s.upload(local, "renamed.bin");
            assertArrayEquals(new byte[] {9, 8}, s.download("renamed.bin"));

            Module lib = s.loadModule("mlp.so");
            assertEquals("rpc", lib.typeKey());
            assertTrue(lib.remoteModule() != null);
            assertThrows(UnsupportedOperationException.class, lib::moteModule);
            Module vm = lib.getFunction("vm_load_executable").invoke().asModule();
            TVMValue none = vm.getFunction("vm_initialization").pushArg(1).pushArg(0).pushArg(2).invoke();
            assertTrue(none instanceof TVMValueNull, none.toString());
            // A remote module as an argument, a remote function as the result.
            Function forward = s.getFunction("tvm.rpc.server.ModuleGetFunction")
                    .call(vm, "forward", false).asFunction();
            assertTrue(forward.remoteFunction() != null);
            assertThrows(UnknownFunctionException.class, () -> vm.getFunction("no_such_function"));
            assertThrows(UnknownFunctionException.class, () -> s.getFunction("no.such.function"));
            // The server's errors carry its message; the session goes on.
            RpcRemoteException e = assertThrows(RpcRemoteException.class, () -> s.download("missing.bin"));
            assertTrue(e.getMessage().contains("missing.bin"), e.getMessage());
            assertThrows(RpcRemoteException.class, () -> forward.call());
            // Local arrays and local functions cannot be passed (remoteArrays... cover remote ones).
            org.mote.tvm4j.NDArray arr = org.mote.tvm4j.NDArray.empty(new long[] {2});
            IllegalArgumentException mixed = assertThrows(IllegalArgumentException.class,
                    () -> forward.pushArg(arr).invoke());
            assertTrue(mixed.getMessage().contains("a local array"), mixed.getMessage());
            arr.release();
            Function converted = Function.convertFunc(args -> 1L);
            assertThrows(IllegalArgumentException.class, () -> forward.call(converted));
            converted.release();
            assertArrayEquals(data, s.download("d.bin"));
            vm.release();
            lib.release();
            lib.release();
            assertThrows(IllegalStateException.class, () -> lib.getFunction("vm_load_executable"));
        });
    }

    /**
     * TVM's Android RPC flow in tvm4j's words: a kernel library uploaded and loaded on the
     * server, arrays made on the session's device, filled, passed, read back; checked against
     * a naive product, every round with a poisoned output. Then copies between local and remote
     * arrays, and the refusals of mixing them.
     */
    @Test
    void remoteArraysRunAKernelOnTheServer() throws Exception {
        withSession(s -> {
            s.upload(Paths.get(RpcServerTest.zoo(), "kernels.so").toFile(), "k.so");
            Module lib = s.loadModule("k.so");
            Function gemm = lib.getFunction("gemm");
            Device dev = s.device("cpu", 0);
            TVMType f32 = new TVMType("float32");
            Tensor a = Tensor.empty(new long[] {64, 32}, f32, dev);
            NDArray b = NDArray.empty(new long[] {32, 48}, f32, dev);
            Tensor c = Tensor.empty(new long[] {64, 48}, dev);
            assertTrue(a.remoteTensor() != null && c.remoteTensor() != null);
            assertSame(dev, a.device());
            assertThrows(UnsupportedOperationException.class, a::moteTensor);
            java.util.Random r = new java.util.Random(31);
            float[] nan = new float[64 * 48];
            java.util.Arrays.fill(nan, Float.NaN);
            for (int round = 0; round < 2; round++) {
                float[] av = RemoteTensorTest.random(64 * 32, r);
                float[] bv = RemoteTensorTest.random(32 * 48, r);
                a.copyFrom(av);
                b.copyFrom(bv);
                c.copyFrom(nan);
                assertArrayEquals(av, a.asFloatArray());
                TVMValue none = gemm.pushArg(a).pushArg(b).pushArg(c).invoke();
                assertTrue(none instanceof TVMValueNull, none.toString());
                Zoo.assertClose("tvm4j gemm round " + round, Zoo.doubles(c.asFloatArray()),
                        RemoteTensorTest.matmul(av, bv, 64, 32, 48), 1e-5, 1e-5);
                assertArrayEquals(RemoteTensorTest.le(c.asFloatArray()), c.internal());
            }
            // copyTo: remote to local, local to remote.
            Tensor host = Tensor.empty(new long[] {64, 48});
            c.copyTo(host);
            assertArrayEquals(c.asFloatArray(), host.asFloatArray());
            host.copyFrom(nan);
            host.copyTo(c);
            assertTrue(Float.isNaN(c.asFloatArray()[17]));
            // Mixing is refused: a local array to a remote function, a remote one to a local function.
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                    () -> gemm.pushArg(host));
            assertTrue(e.getMessage().contains("a local array"), e.getMessage());
            Module localLib = Module.load(Paths.get(RpcServerTest.zoo(), "kernels.so").toString());
            Function localGemm = localLib.getFunction("gemm");
            e = assertThrows(IllegalArgumentException.class, () -> localGemm.pushArg(a));
            assertTrue(e.getMessage().contains("RPC server"), e.getMessage());
            assertThrows(IllegalArgumentException.class, () -> localGemm.call(a, b, c));
            // A plain device with a session mask is not a session's device.
            assertThrows(IllegalArgumentException.class,
                    () -> Tensor.empty(new long[] {1}, new Device(dev.deviceType, 0)));
            localGemm.release();
            localLib.release();
            host.release();
            // Released: freed on the server, refused here.
            a.release();
            a.release();
            assertThrows(IllegalStateException.class, a::asFloatArray);
            assertTrue(a.remoteTensor().isClosed());
            b.release();
            c.release();
            gemm.release();
            lib.release();
        });
    }

    /** A model's VM on the server returns an array that lives there; compared with TVM's output. */
    @Test
    void aRemoteModelReturnsAnArrayOfTheServer() throws Exception {
        java.util.List<Zoo.Npy> ins = Zoo.npz("mlp.forward.inputs.npz", "arg");
        Zoo.Npy want = Zoo.npz("mlp.forward.expected.npz", "out").get(0);
        withSession(s -> {
            s.upload(Paths.get(RpcServerTest.zoo(), "mlp.so").toFile());
            Module vm = s.loadModule("mlp.so").getFunction("vm_load_executable").invoke().asModule();
            vm.getFunction("vm_initialization").pushArg(1).pushArg(0).pushArg(2).invoke();
            Function forward = vm.getFunction("forward");
            Device dev = s.device("cpu");
            for (Zoo.Npy in : ins) {
                Tensor t = Tensor.empty(in.shape, new TVMType(in.dtype), dev);
                t.copyFromRaw(in.data);
                forward.pushArg(t);
            }
            TensorBase out = forward.invoke().asTensor();
            assertTrue(out instanceof NDArray, out.toString());
            NDArray y = (NDArray) out;
            assertTrue(y.remoteTensor() != null);
            assertArrayEquals(want.shape, y.shape());
            assertEquals(new Device(1, 0), y.device());
            Zoo.assertClose("tvm4j mlp forward", Zoo.doubles(y.asFloatArray()),
                    Zoo.values(want.dtype, want.data), 1e-5, 1e-5);
            // Mote's server keeps a returned array read-only.
            RpcRemoteException e = assertThrows(RpcRemoteException.class, () -> y.copyFrom(new float[16]));
            assertTrue(e.getMessage().contains("read-only"), e.getMessage());
            y.release();
        });
    }

    /**
     * TVM's Android RPC tutorial itself, in tvm4j: the OpenCL zoo's {@code gemm_cl.so} (a GEMM
     * TVM compiled for OpenCL) uploaded, its {@code gemm_gpu} run on arrays made on the
     * session's {@code opencl(0)} (POCL here, the phone's GPU there), checked against a naive
     * product with the output poisoned.
     */
    @Test
    void theAndroidRpcFlowRunsOnTheServersOpenClDevice() throws Exception {
        withSession(s -> {
            Device cl = s.device("opencl", 0);
            assertTrue(cl.exist(), "the server has no OpenCL device (POCL: scripts/opencl.sh)");
            s.upload(Zoo.openclDir().resolve("gemm_cl.so").toFile());
            Module lib = s.loadModule("gemm_cl.so");
            Function gemm = lib.getFunction("gemm_gpu");
            TVMType f32 = new TVMType("float32");
            long[] shape = {256, 256};
            Tensor a = Tensor.empty(shape, f32, cl);
            Tensor b = Tensor.empty(shape, f32, cl);
            Tensor c = Tensor.empty(shape, f32, cl);
            assertEquals(new org.mote.rpc.RemoteDevice(4, 0), c.remoteTensor().device());
            java.util.Random r = new java.util.Random(4);
            float[] av = RemoteTensorTest.random(256 * 256, r);
            float[] bv = RemoteTensorTest.random(256 * 256, r);
            float[] nan = new float[256 * 256];
            java.util.Arrays.fill(nan, Float.NaN);
            a.copyFrom(av);
            b.copyFrom(bv);
            c.copyFrom(nan);
            assertTrue(gemm.pushArg(a).pushArg(b).pushArg(c).invoke() instanceof TVMValueNull);
            // The manifest's tolerance for this GEMM (256-term sums, contracted to fma or not).
            Zoo.assertClose("gemm_gpu on opencl(0)", Zoo.doubles(c.asFloatArray()),
                    RemoteTensorTest.matmul(av, bv, 256, 256, 256), 1e-4, 1e-4);
            a.release();
            b.release();
            c.release();
            gemm.release();
            lib.release();
        });
    }
}
