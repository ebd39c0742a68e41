package org.mote.rpc;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.mote.Function;
import org.mote.Tensor;
import org.mote.UnsupportedException;
import org.mote.Zoo;

/**
 * Tensors on the server through Mote's Java RPC client ({@link RemoteSession#empty},
 * {@link RemoteTensor}): a kernel-only library's GEMM run on the server on tensors the client
 * allocated and filled, against a naive Java matrix product, on Mote's server and on TVM 0.27's
 * own Python server; a model's VM returning a tensor, against TVM's expected output; the
 * refusals; and tensors moved by several threads of one session at once.
 */
class RemoteTensorTest {
    private static Server server;
    private static int port;

    @BeforeAll
    static void start() {
        server = Server.builder().port(0).maxSessions(8).serveRegisteredFunctions(true).start();
        port = server.port().orElseThrow();
    }

    @AfterAll
    static void stop() {
        server.stop();
    }

    static byte[] le(float[] v) {
        ByteBuffer b = ByteBuffer.allocate(v.length * 4).order(ByteOrder.LITTLE_ENDIAN);
        b.asFloatBuffer().put(v);
        return b.array();
    }

    static float[] floats(byte[] b) {
        float[] v = new float[b.length / 4];
        ByteBuffer.wrap(b).order(ByteOrder.LITTLE_ENDIAN).asFloatBuffer().get(v);
        return v;
    }

    static float[] random(int n, Random r) {
        float[] v = new float[n];
        for (int i = 0; i < n; i++) {
            v[i] = r.nextFloat() * 2 - 1;
        }
        return v;
    }

    /** The naive product of row-major a[m,k] and b[k,n], in double. */
    static double[] matmul(float[] a, float[] b, int m, int k, int n) {
        double[] c = new double[m * n];
        for (int i = 0; i < m; i++) {
            for (int j = 0; j < n; j++) {
                double s = 0;
                for (int p = 0; p < k; p++) {
                    s += (double) a[i * k + p] * b[p * n + j];
                }
                c[i * n + j] = s;
            }
        }
        return c;
    }

    /** kernels.so's gemm(A[64,32], B[32,48], C[64,48]) on tensors of the server, twice. */
    static void gemmOnTheServer(RemoteSession s, String who) throws Exception {
        s.upload("k.so", Files.readAllBytes(Paths.get(Zoo.path("kernels.so"))));
        RemoteDevice cpu = RemoteDevice.cpu();
        try (RemoteModule lib = s.loadModule("k.so");
                RemoteFunction gemm = lib.getFunction("gemm");
                RemoteTensor a = s.empty(new long[] {64, 32}, "float32", cpu);
                RemoteTensor b = s.empty(new long[] {32, 48}, "float32", cpu);
                RemoteTensor c = s.empty(new long[] {64, 48}, "float32", cpu)) {
            assertArrayEquals(new long[] {64, 32}, a.shape());
            assertEquals("float32", a.dtype());
            assertEquals(cpu, a.device());
            Random r = new Random(29);
            float[] nan = new float[64 * 48];
            Arrays.fill(nan, Float.NaN);
            for (int round = 0; round < 2; round++) {
                float[] av = random(64 * 32, r);
                float[] bv = random(32 * 48, r);
                a.copyFrom(le(av));
                b.copyFrom(le(bv));
                assertArrayEquals(le(av), a.toBytes(), who + ": A reads back");
                // The output is poisoned each round, so its values must come from this call.
                c.copyFrom(le(nan));
                assertNull(gemm.call(a, b, c), who);
                Zoo.assertClose(who + ": gemm round " + round, Zoo.doubles(floats(c.toBytes())),
                        matmul(av, bv, 64, 32, 48), 1e-5, 1e-5);
                // The inputs were not written.
                assertArrayEquals(le(bv), b.toBytes(), who + ": B unchanged");
            }
        }
    }

    @Test
    void aKernelRunsOnTensorsOfMotesServer() throws Exception {
        try (RemoteSession s = RemoteSession.connect("127.0.0.1", port, "")) {
            gemmOnTheServer(s, "Mote's server");
        }
    }

    /** The same flow against TVM 0.27's own server: the client speaks the protocol, not Mote's dialect. */
    @Test
    void aKernelRunsOnTensorsOfTvmsServer() throws Exception {
        int p = RpcServerTest.freePort();
        try (RpcServerTest.Py py = new RpcServerTest.Py("-m", "tvm.exec.rpc_server", "--host",
                "127.0.0.1", "--port", Integer.toString(p), "--port-end", Integer.toString(p + 1))) {
            RpcServerTest.until("TVM's server listens on " + p, 30, () -> {
                assertTrue(py.process.isAlive(), () -> "TVM's server exited:\n" + py.output());
                return RpcServerTest.accepts(p);
            });
            try (RemoteSession s = RemoteSession.connect("127.0.0.1", p, "")) {
                gemmOnTheServer(s, "TVM's server");
            }
        }
    }

    @Test
    void aModelReturnsATensorOfTheServer() throws Exception {
        List<Zoo.Npy> ins = Zoo.npz("mlp.forward.inputs.npz", "arg");
        Zoo.Npy want = Zoo.npz("mlp.forward.expected.npz", "out").get(0);
        try (RemoteSession s = RemoteSession.connect("127.0.0.1", port, "")) {
            s.upload("mlp.so", Files.readAllBytes(Paths.get(Zoo.path("mlp.so"))));
            List<RemoteTensor> inputs = new ArrayList<>();
            try (RemoteModule lib = s.loadModule("mlp.so");
                    RemoteModule vm = (RemoteModule) lib.getFunction("vm_load_executable").call()) {
                assertNull(vm.getFunction("vm_initialization").call(1, 0L, 2));
                RemoteFunction forward = vm.getFunction("forward");
                for (Zoo.Npy in : ins) {
                    RemoteTensor t = s.empty(in.shape, in.dtype, RemoteDevice.cpu());
                    t.copyFrom(in.data);
                    inputs.add(t);
                }
                for (int round = 0; round < 2; round++) {
                    Object out = forward.call(inputs.toArray());
                    assertTrue(out instanceof RemoteTensor, String.valueOf(out));
                    RemoteTensor y = (RemoteTensor) out;
                    assertArrayEquals(want.shape, y.shape());
                    assertEquals(want.dtype, y.dtype());
                    assertEquals(RemoteDevice.cpu(), y.device());
                    Zoo.assertClose("mlp forward round " + round, Zoo.values(y.dtype(), y.toBytes()),
                            Zoo.values(want.dtype, want.data), 1e-5, 1e-5);
                    // Mote's server keeps returned tensors read-only; the session goes on.
                    RpcRemoteException e = assertThrows(RpcRemoteException.class,
                            () -> y.copyFrom(new byte[y.toBytes().length]));
                    assertTrue(e.getMessage().contains("read-only"), e.getMessage());
                    y.close();
                    assertThrows(IllegalStateException.class, y::toBytes);
                    assertThrows(IllegalStateException.class, () -> forward.call(y));
                }
                forward.close();
            } finally {
                for (RemoteTensor t : inputs) {
                    t.close();
                }
            }
        }
    }

    @Test
    void aRegisteredFunctionsTensorArrivesAsARemoteTensor() {
        Function.register("test.rpc.tensor.iota", args -> {
            Tensor t = Tensor.empty(new long[] {3}, "float32");
            t.copyFrom(new float[] {1, 2, 3});
            return t;
        });
        try (RemoteSession s = RemoteSession.connect("127.0.0.1", port, "");
                RemoteFunction f = s.getFunction("test.rpc.tensor.iota");
                RemoteTensor t = (RemoteTensor) f.call()) {
            assertEquals("float32", t.dtype());
            assertArrayEquals(new long[] {3}, t.shape());
            assertArrayEquals(le(new float[] {1, 2, 3}), t.toBytes());
        } finally {
            Function.unregister("test.rpc.tensor.iota");
        }
    }

    @Test
    void badTensorsAreRefusedBeforeAnythingIsSent() {
        RemoteDevice cpu = RemoteDevice.cpu();
        RemoteSession s = RemoteSession.connect("127.0.0.1", port, "");
        try (RemoteSession other = RemoteSession.connect("127.0.0.1", port, "");
                RemoteFunction up = s.getFunction("tvm.rpc.server.upload")) {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                    () -> s.empty(new long[] {2}, "complex64", cpu));
            assertTrue(e.getMessage().contains("complex64"), e.getMessage());
            e = assertThrows(IllegalArgumentException.class, () -> s.empty(new long[] {2, -1}, "float32", cpu));
            assertTrue(e.getMessage().contains("negative"), e.getMessage());
            assertThrows(NullPointerException.class, () -> s.empty(null, "float32", cpu));
            // A device the server does not have: its error, and the session goes on.
            assertThrows(RpcRemoteException.class, () -> s.empty(new long[] {2}, "float32", new RemoteDevice(2, 0)));
            try (RemoteTensor t = s.empty(new long[] {2, 3}, "int32", cpu);
                    RemoteTensor theirs = other.empty(new long[] {1}, "float32", cpu)) {
                e = assertThrows(IllegalArgumentException.class, () -> t.copyFrom(new byte[23]));
                assertTrue(e.getMessage().contains("24"), e.getMessage());
                assertArrayEquals(new byte[24], t.toBytes(), "Mote's server zeroes what it allocates");
                e = assertThrows(IllegalArgumentException.class, () -> up.call("x.bin", theirs));
                assertTrue(e.getMessage().contains("another RPC session"), e.getMessage());
                try (Tensor local = Tensor.empty(new long[] {1}, "float32")) {
                    UnsupportedException u = assertThrows(UnsupportedException.class, () -> up.call("x.bin", local));
                    assertTrue(u.getMessage().contains("RemoteSession.empty"), u.getMessage());
                }
                // A tensor where the function wants bytes: the server's error.
                assertThrows(RpcRemoteException.class, () -> up.call("x.bin", t));
                s.close();
                assertThrows(IllegalStateException.class, t::toBytes);
                assertThrows(IllegalStateException.class, () -> t.copyFrom(new byte[24]));
                assertEquals(1, theirs.toBytes().length / 4);
            }
        } finally {
            s.close();
        }
    }

    /** Four threads move data through their own tensors of one session at once; every byte checked. */
    @Test
    void threadsShareOneSession() throws Exception {
        ExecutorService pool = Executors.newFixedThreadPool(4);
        try (RemoteSession s = RemoteSession.connect("127.0.0.1", port, "")) {
            List<Future<?>> jobs = new ArrayList<>();
            for (int t = 0; t < 4; t++) {
                long seed = t;
                jobs.add(pool.submit(() -> {
                    Random r = new Random(seed);
                    for (int i = 0; i < 50; i++) {
                        int n = 1 + r.nextInt(4096);
                        try (RemoteTensor x = s.empty(new long[] {n}, "float32", RemoteDevice.cpu())) {
                            byte[] want = le(random(n, r));
                            x.copyFrom(want);
                            byte[] got = x.toBytes();
                            if (!Arrays.equals(want, got)) {
                                fail("thread " + seed + " round " + i + ": the bytes differ");
                            }
                        }
                    }
                    return null;
                }));
            }
            for (Future<?> f : jobs) {
                f.get(120, TimeUnit.SECONDS);
            }
        } finally {
            pool.shutdownNow();
        }
    }
}
