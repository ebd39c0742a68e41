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
import org.mote.tvm4j.Device;
import org.mote.tvm4j.Function;
import org.mote.tvm4j.Module;
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
        int[] port = new int[1];
        Server server = startServer(port);
        RPCSession s = null;
        try {
            s = Client.connect("127.0.0.1", port[0]);
            byte[] data = {1, 2, 3, 4};
            s.upload(data, "d.bin");
            assertArrayEquals(data, s.download("d.bin"));
            RPCSession session = s;
            assertThrows(IllegalArgumentException.class, () -> session.upload(data, null));
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
            Function forward = session.getFunction("tvm.rpc.server.ModuleGetFunction")
                    .call(vm, "forward", false).asFunction();
            assertTrue(forward.remoteFunction() != null);
            assertThrows(UnknownFunctionException.class, () -> vm.getFunction("no_such_function"));
            assertThrows(UnknownFunctionException.class, () -> session.getFunction("no.such.function"));
            // The server's errors carry its message; the session goes on.
            RpcRemoteException e = assertThrows(RpcRemoteException.class, () -> session.download("missing.bin"));
            assertTrue(e.getMessage().contains("missing.bin"), e.getMessage());
            assertThrows(RpcRemoteException.class, () -> forward.call());
            // Arrays do not cross yet; local functions cannot be passed.
            org.mote.tvm4j.NDArray arr = org.mote.tvm4j.NDArray.empty(new long[] {2});
            assertThrows(org.mote.UnsupportedException.class, () -> forward.pushArg(arr).invoke());
            arr.release();
            Function converted = Function.convertFunc(args -> 1L);
            assertThrows(IllegalArgumentException.class, () -> forward.call(converted));
            converted.release();
            assertArrayEquals(data, s.download("d.bin"));
            vm.release();
            lib.release();
            lib.release();
            assertThrows(IllegalStateException.class, () -> lib.getFunction("vm_load_executable"));
        } finally {
            close(s);
            server.terminate();
        }
    }
}
