package org.mote.rpc;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.mote.CallbackException;
import org.mote.ErrorCode;
import org.mote.Function;
import org.mote.MoteIoException;
import org.mote.Tensor;
import org.mote.UnsupportedException;

/**
 * Mote's Java RPC client ({@link RemoteSession}, {@link RemoteFunction}, {@link RemoteModule})
 * against Mote's server started in this JVM ({@link Server}): the server's own functions, files,
 * a zoo model loaded and driven through the VM's functions, functions registered in this
 * process, and each kind of failure with its exception type.
 */
class RemoteSessionTest {
    private static final String KEY = "java-client";
    private static Server server;
    private static int port;

    @BeforeAll
    static void start() {
        server = Server.builder().port(0).key(KEY).maxSessions(8).start();
        port = server.port().orElseThrow();
    }

    @AfterAll
    static void stop() {
        server.stop();
    }

    static RemoteSession connect() {
        return RemoteSession.connect("127.0.0.1", port, KEY);
    }

    static byte[] randomBytes(int n, long seed) {
        byte[] b = new byte[n];
        new Random(seed).nextBytes(b);
        return b;
    }

    @Test
    void theLibraryHasTheClient() {
        assertTrue(RemoteSession.isAvailable());
    }

    @Test
    void uploadThenDownloadGivesTheSameBytes() {
        try (RemoteSession s = connect()) {
            assertEquals("127.0.0.1:" + port, s.peer());
            byte[] data = randomBytes(300_000, 1);
            s.upload("blob.bin", data);
            assertArrayEquals(data, s.download("blob.bin"));
            s.upload("empty.bin", new byte[0]);
            assertArrayEquals(new byte[0], s.download("empty.bin"));
            // The same through the server's own functions, called like any remote function.
            try (RemoteFunction up = s.getFunction("tvm.rpc.server.upload");
                    RemoteFunction down = s.getFunction("tvm.rpc.server.download")) {
                assertNotNull(up);
                assertNotNull(down);
                assertEquals("tvm.rpc.server.upload", up.name());
                byte[] other = randomBytes(1000, 2);
                assertNull(up.call("direct.bin", other));
                assertArrayEquals(other, (byte[]) down.call("direct.bin"));
            }
        }
    }

    @Test
    void aMissingFunctionIsNull() {
        try (RemoteSession s = connect()) {
            assertNull(s.getFunction("no.such.function"));
            // Not served by default: a function registered in this process.
            Function.register("test.rpc.client.hidden", args -> 1L);
            try {
                assertNull(s.getFunction("test.rpc.client.hidden"));
            } finally {
                Function.unregister("test.rpc.client.hidden");
            }
        }
    }

    @Test
    void aZooModelLoadsAndItsVmFunctionsRun() throws Exception {
        byte[] so = Files.readAllBytes(Paths.get(RpcServerTest.zoo(), "mlp.so"));
        try (RemoteSession s = connect()) {
            s.upload("mlp.so", so);
            try (RemoteModule lib = s.loadModule("mlp.so")) {
                assertEquals("mlp.so", lib.name());
                assertNull(lib.getFunction("no_such_function"));
                RemoteFunction load = lib.getFunction("vm_load_executable");
                assertNotNull(load);
                // A module as a result.
                Object vm = load.call();
                assertTrue(vm instanceof RemoteModule, String.valueOf(vm));
                RemoteModule m = (RemoteModule) vm;
                assertNull(m.name());
                // cpu(0) with the pooled allocator, as relax.VirtualMachine(lib, remote.cpu()) asks.
                assertNull(m.getFunction("vm_initialization").call(1, 0L, 2));
                RemoteFunction forward = m.getFunction("forward");
                assertNotNull(forward);
                assertNull(m.getFunction("no_such_function"));
                // A module as an argument, a function as a result.
                try (RemoteFunction get = s.getFunction("tvm.rpc.server.ModuleGetFunction")) {
                    Object f = get.call(m, "forward", false);
                    assertTrue(f instanceof RemoteFunction, String.valueOf(f));
                    ((RemoteFunction) f).close();
                    assertNull(get.call(m, "no_such_function", false));
                }
                // forward without its five inputs: the server's error, and the session goes on.
                RpcRemoteException e = assertThrows(RpcRemoteException.class, forward::call);
                assertFalse(e.getMessage().isEmpty());
                assertNotNull(m.getFunction("forward"));
                // A local tensor does not cross (RemoteTensorTest covers remote ones).
                try (Tensor t = Tensor.empty(new long[] {2}, "float32")) {
                    UnsupportedException u = assertThrows(UnsupportedException.class, () -> forward.call(t));
                    assertTrue(u.getMessage().contains("a local Tensor cannot be passed"), u.getMessage());
                }
                m.close();
                assertThrows(IllegalStateException.class, () -> m.getFunction("forward"));
                forward.close();
                load.close();
            }
            assertTrue(s.deviceExists(RemoteDevice.cpu()));
            assertFalse(s.deviceExists(new RemoteDevice(2, 0)), "a CUDA device on Mote's server");
        }
    }

    @Test
    void aServerErrorIsARemoteExceptionAndTheSessionGoesOn() {
        try (RemoteSession s = connect()) {
            s.upload("here.bin", new byte[] {1, 2, 3});
            RpcRemoteException e = assertThrows(RpcRemoteException.class,
                    () -> s.download("no-such-file.bin"));
            assertTrue(e.getMessage().contains("no-such-file.bin"), e.getMessage());
            assertTrue(e instanceof CallbackException);
            assertEquals(ErrorCode.CALLBACK, e.code());
            assertArrayEquals(new byte[] {1, 2, 3}, s.download("here.bin"));
            assertThrows(RpcRemoteException.class, () -> s.loadModule("here.bin"));
            assertArrayEquals(new byte[] {1, 2, 3}, s.download("here.bin"));
        }
    }

    @Test
    void aWrongKeyOrAClosedPortIsAConnectionException() throws Exception {
        RpcConnectionException wrong = assertThrows(RpcConnectionException.class,
                () -> RemoteSession.connect("127.0.0.1", port, "not-the-key"));
        assertTrue(wrong.getMessage().contains("127.0.0.1:" + port), wrong.getMessage());
        assertTrue(wrong instanceof MoteIoException);
        assertEquals(ErrorCode.IO, wrong.code());
        int closed = RpcServerTest.freePort();
        RpcConnectionException refused = assertThrows(RpcConnectionException.class,
                () -> RemoteSession.connect("127.0.0.1", closed, "", 5, TimeUnit.SECONDS));
        assertTrue(refused.getMessage().contains("127.0.0.1:" + closed), refused.getMessage());
        assertThrows(IllegalArgumentException.class, () -> RemoteSession.connect("127.0.0.1", 70000, ""));
        // The server still serves the right key.
        try (RemoteSession s = connect()) {
            assertNotNull(s.getFunction("tvm.rpc.server.upload"));
        }
    }

    @Test
    void afterCloseEveryCallIsAnIllegalState() {
        RemoteSession s = connect();
        RemoteFunction up = s.getFunction("tvm.rpc.server.upload");
        RemoteFunction down = s.getFunction("tvm.rpc.server.download");
        up.call("a.bin", new byte[] {7});
        assertFalse(s.isClosed());
        s.close();
        assertTrue(s.isClosed());
        s.close(); // a second close does nothing
        assertThrows(IllegalStateException.class, () -> s.getFunction("tvm.rpc.server.upload"));
        assertThrows(IllegalStateException.class, () -> s.upload("b.bin", new byte[] {1}));
        assertThrows(IllegalStateException.class, () -> s.download("a.bin"));
        assertThrows(IllegalStateException.class, () -> s.loadModule("a.bin"));
        // The session's functions too: the session is gone on the server.
        IllegalStateException e = assertThrows(IllegalStateException.class, () -> down.call("a.bin"));
        assertTrue(e.getMessage().contains("closed"), e.getMessage());
        assertFalse(down.isClosed());
        down.close();
        assertThrows(IllegalStateException.class, () -> down.call("a.bin"));
        up.close();
        up.close();
    }

    @Test
    void registeredFunctionsAreServedWhenAsked() {
        Function.register("test.rpc.client.twice", args -> 2 * (Long) args[0]);
        Function.register("test.rpc.client.join", args -> args[0] + ":" + args[1] + ":" + args[2]);
        Function.register("test.rpc.client.fails", args -> {
            throw new IllegalStateException("failing on purpose");
        });
        Function.register("test.rpc.client.tensor", args -> Tensor.empty(new long[] {3}, "float32"));
        Server serving = Server.builder().port(0).serveRegisteredFunctions(true).start();
        try (RemoteSession s = RemoteSession.connect("127.0.0.1", serving.port().orElseThrow(), "")) {
            assertEquals(42L, s.getFunction("test.rpc.client.twice").call(21));
            assertEquals("abc:2.5:true", s.getFunction("test.rpc.client.join").call("abc", 2.5, true));
            RpcRemoteException e = assertThrows(RpcRemoteException.class,
                    () -> s.getFunction("test.rpc.client.fails").call());
            assertTrue(e.getMessage().contains("failing on purpose"), e.getMessage());
            try (RemoteTensor t = (RemoteTensor) s.getFunction("test.rpc.client.tensor").call()) {
                assertArrayEquals(new byte[12], t.toBytes());
            }
            assertEquals(42L, s.getFunction("test.rpc.client.twice").call(21L));
        } finally {
            serving.stop();
            for (String n : new String[] {"twice", "join", "fails", "tensor"}) {
                Function.unregister("test.rpc.client." + n);
            }
        }
    }

    @Test
    void referencesOfAnotherSessionAreRefused() {
        try (RemoteSession a = connect(); RemoteSession b = connect()) {
            a.upload("x.bin", new byte[] {1});
            try (RemoteFunction fa = a.getFunction("tvm.rpc.server.download");
                    RemoteFunction upB = b.getFunction("tvm.rpc.server.upload")) {
                IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                        () -> upB.call("y.bin", fa));
                assertTrue(e.getMessage().contains("another RPC session"), e.getMessage());
                assertThrows(IllegalArgumentException.class, () -> upB.call("y.bin", new Object()));
                assertArrayEquals(new byte[] {1}, (byte[]) fa.call("x.bin"));
            }
        }
    }

    @Test
    void aServerThatStopsBreaksTheConnection() {
        Server lone = Server.builder().port(0).start();
        RemoteSession s = RemoteSession.connect("127.0.0.1", lone.port().orElseThrow(), "");
        try {
            s.upload("a.bin", new byte[] {1});
            lone.stop(); // ends the idle session
            assertThrows(RpcConnectionException.class, () -> s.download("a.bin"));
            // Broken: the session is closed from then on.
            assertThrows(IllegalStateException.class, () -> s.download("a.bin"));
        } finally {
            s.close();
            lone.stop();
        }
    }

    /** Calls on several threads while functions and the session are closed under them. */
    @Test
    void closingWhileOtherThreadsCallIsSafe() throws Exception {
        ExecutorService pool = Executors.newFixedThreadPool(4);
        int allOk = 0;
        int allClosed = 0;
        try {
            for (int round = 0; round < 5; round++) {
                RemoteSession s = connect();
                RemoteFunction down = s.getFunction("tvm.rpc.server.download");
                s.upload("r.bin", new byte[] {(byte) round});
                AtomicInteger ok = new AtomicInteger();
                AtomicInteger closed = new AtomicInteger();
                List<Future<?>> calls = new ArrayList<>();
                for (int t = 0; t < 4; t++) {
                    calls.add(pool.submit(() -> {
                        for (int i = 0; i < 50; i++) {
                            try {
                                byte[] b = (byte[]) down.call("r.bin");
                                assertEquals(1, b.length);
                                ok.incrementAndGet();
                            } catch (IllegalStateException e) {
                                closed.incrementAndGet();
                            }
                        }
                        return null;
                    }));
                }
                // Round 0 closes at once; later rounds once some calls ran, while others run.
                int started = round;
                RpcServerTest.until("calls run", 30, () -> ok.get() >= started);
                if (round % 2 == 0) {
                    down.close();
                } else {
                    s.close();
                }
                for (Future<?> f : calls) {
                    f.get(60, TimeUnit.SECONDS);
                }
                assertEquals(200, ok.get() + closed.get());
                allOk += ok.get();
                allClosed += closed.get();
                s.close();
                down.close();
            }
        } finally {
            pool.shutdownNow();
        }
        // Both outcomes happened: the closes did race the calls.
        assertTrue(allOk > 0 && allClosed > 0, allOk + " calls ran, " + allClosed + " found it closed");
    }
}
