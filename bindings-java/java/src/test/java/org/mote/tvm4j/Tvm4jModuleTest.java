package org.mote.tvm4j;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.File;
import java.io.IOException;
import java.net.ServerSocket;
import java.util.Random;
import org.junit.jupiter.api.Test;

/** tvm4j's Module (with the zoo's kernel libraries) and rpc classes on Mote. */
class Tvm4jModuleTest {
    private static String zoo(String file) {
        String d = System.getProperty("mote.zoo", "");
        if (d.isEmpty()) {
            fail("the system property mote.zoo is not set: run scripts/test-java.sh (MOTE_ZOO_DIR names the zoo)");
        }
        return new File(d, file).getPath();
    }

    private static float[] random(int n, Random r) {
        float[] f = new float[n];
        for (int i = 0; i < n; i++) {
            f[i] = r.nextFloat() - 0.5f;
        }
        return f;
    }

    private static float[] matmul(float[] a, float[] b, int m, int k, int n) {
        float[] c = new float[m * n];
        for (int i = 0; i < m; i++) {
            for (int j = 0; j < n; j++) {
                double s = 0;
                for (int x = 0; x < k; x++) {
                    s += a[i * k + x] * b[x * n + j];
                }
                c[i * n + j] = (float) s;
            }
        }
        return c;
    }

    @Test
    void kernelLibraryRunsThroughEntryFuncAndCall() {
        Module gemm = Module.load(zoo("gemm.so"));
        assertTrue(gemm.asModule() == gemm);
        assertEquals("library", gemm.typeKey());
        Device dev = new Device("cpu", 0);
        Random r = new Random(1);
        float[] ad = random(64 * 32, r);
        float[] bd = random(32 * 48, r);
        Tensor a = Tensor.empty(new long[] {64, 32}, dev);
        a.copyFrom(ad);
        NDArray b = NDArray.empty(new long[] {32, 48}, dev);
        b.copyFrom(bd);
        Tensor c = Tensor.empty(new long[] {64, 48}, dev);
        TVMValue none = gemm.entryFunc().pushArg(a).pushArg(b).pushArg(c).invoke();
        assertTrue(none instanceof TVMValueNull);
        float[] want = matmul(ad, bd, 64, 32, 48);
        assertArrayEquals(want, c.asFloatArray(), 1e-4f);
        c.copyFrom(new float[64 * 48]);
        assertTrue(gemm.entryFunc() == gemm.entryFunc());
        gemm.entryFunc().call(a, b, c);
        assertArrayEquals(want, c.asFloatArray(), 1e-4f);
        c.copyFrom(new float[64 * 48]);
        gemm.getFunction("gemm").call(a, b, c);
        assertArrayEquals(want, c.asFloatArray(), 1e-4f);
        a.release();
        b.release();
        c.release();
        gemm.release();
        gemm.release(); // a second release does nothing
        assertThrows(IllegalStateException.class, () -> gemm.getFunction("gemm"));
    }

    @Test
    void kernelsOfAManyKernelLibrary() {
        Module m = Module.load(zoo("kernels.so"), "so");
        // Three kernels and no main: no entry function.
        assertThrows(org.mote.UnknownFunctionException.class, m::entryFunc);
        assertThrows(org.mote.UnknownFunctionException.class, () -> m.getFunction("nope"));
        Tensor x = Tensor.empty(new long[] {16}, new TVMType("int32"));
        int[] xs = new int[16];
        for (int i = 0; i < 16; i++) {
            xs[i] = i * 3 - 7;
        }
        x.copyFrom(xs);
        Tensor y = Tensor.empty(new long[] {16}, new TVMType("int32"));
        Function shift = m.getFunction("shift", true);
        shift.pushArg(x).pushArg(5).pushArg(y).invoke();
        int[] ys = y.asIntArray();
        for (int i = 0; i < 16; i++) {
            assertEquals(xs[i] + 5, ys[i]);
        }
        m.release();
        // Functions of a released module cannot be called.
        assertThrows(IllegalStateException.class, () -> shift.call(x, 5, y));
        x.release();
        y.release();
    }

    @Test
    void missingLibraryIsAnIoError() {
        assertThrows(org.mote.MoteException.class, () -> Module.load(zoo("no-such.so")));
    }

    @Test
    void enabledTargets() {
        assertTrue(Module.enabled("cpu") && Module.enabled("llvm") && Module.enabled("llvm -mcpu=generic"));
        assertTrue(!Module.enabled("cuda") && !Module.enabled("vulkan") && !Module.enabled("metal"));
        // The tests' library is built with mote-java's rpc feature (WithoutRpcTest: without).
        assertTrue(Module.enabled("rpc"));
        Module g = Module.load(zoo("gemm.so"));
        assertThrows(UnsupportedOperationException.class, () -> g.importModule(g));
        g.release();
    }

    @Test
    void rpcServerServesAndTerminates() throws IOException {
        int port;
        try (ServerSocket s = new ServerSocket(0)) {
            port = s.getLocalPort();
        }
        org.mote.tvm4j.rpc.Server server = new org.mote.tvm4j.rpc.Server(port);
        server.start();
        assertEquals(port, server.moteServer().port().getAsInt());
        // tvm4j's TestUtils.startServer relies on a taken port being an IOException.
        assertThrows(IOException.class, () -> new org.mote.tvm4j.rpc.Server(port));
        server.terminate();
        server.terminate();
        assertTrue(server.moteServer().isStopped());
        assertThrows(IllegalStateException.class, server::start);
        // Nothing listens there any more.
        org.mote.rpc.RpcConnectionException e = assertThrows(org.mote.rpc.RpcConnectionException.class,
                () -> org.mote.tvm4j.rpc.Client.connect("127.0.0.1", port));
        assertTrue(e.getMessage().contains("127.0.0.1:" + port), e.getMessage());
    }
}
