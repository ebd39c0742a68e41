package org.mote;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The OpenCL options of {@link SessionOptions} and {@link Session#device()}, on the OpenCL
 * zoo's {@code mlp_cl.so} (system property mote.openclZoo: MOTE_OPENCL_ZOO_DIR, from
 * scripts/opencl-zoo.sh) and this host's OpenCL device (POCL: scripts/opencl.sh).
 */
class OpenClTest {
    @TempDir
    Path cache;

    static Path openclZoo() {
        return Zoo.openclDir();
    }

    static String mlpCl() {
        return openclZoo().resolve("mlp_cl.so").toString();
    }

    @Test
    void mlpClRunsOnTheChosenDeviceAndMatchesTvm() throws IOException {
        Zoo.Npy x = Zoo.npz(openclZoo(), "mlp_cl.main.inputs.npz", "arg").get(0);
        Zoo.Npy want = Zoo.npz(openclZoo(), "mlp_cl.main.expected.npz", "out").get(0);
        SessionOptions o = new SessionOptions().openclDevice(0).openclProfiling(true)
                .openclProgramCache(cache.toString());
        try (Model m = Model.load(mlpCl()); Session s = m.newSession(o); Tensor in = x.toTensor()) {
            Device d = s.device();
            assertEquals("opencl", d.deviceType());
            assertEquals(4, d.dlpackType());
            assertEquals(0, d.id());
            assertFalse(d.isCpu());
            assertEquals("opencl(0)", d.toString());
            for (int round = 0; round < 2; round++) {
                Tensor[] out = s.run("main", in);
                assertEquals(1, out.length);
                Zoo.assertClose("mlp_cl.main out0, round " + round, out[0], want, 1e-5, 1e-5);
                out[0].close();
            }
        }
        try (Stream<Path> files = Files.list(cache)) {
            assertTrue(files.count() > 0, "no compiled program in the cache directory " + cache);
        }
    }

    @Test
    void theStatusLineNamesThisHostsDevice() {
        // POCL's one CPU device on the test host, as OpenCL names it; the RPC server's status
        // shows the same line.
        String line = Mote.openclStatus();
        assertTrue(line.startsWith("OpenCL: 0: "), line);
        assertFalse(line.contains("none"), line);
        assertTrue(line.contains("(OpenCL "), line);
        assertEquals(line, org.mote.rpc.Server.openclStatus());
    }

    @Test
    void aDeviceOpenClDoesNotListIsAnInvalidArgument() {
        try (Model m = Model.load(mlpCl())) {
            InvalidArgumentException e = assertThrows(InvalidArgumentException.class,
                    () -> m.newSession(new SessionOptions().openclDevice(99)).close());
            assertTrue(e.getMessage().contains("opencl_device 99"), e.getMessage());
            assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
        }
    }

    @Test
    void badOptionValuesAreRefusedInJava() {
        SessionOptions o = new SessionOptions();
        assertThrows(InvalidArgumentException.class, () -> o.openclDevice(-1));
        assertThrows(InvalidArgumentException.class, () -> o.openclProgramCache(""));
        o.openclProgramCache(null);
    }

    @Test
    void aCpuModelIgnoresTheOpenClOptionsAndRunsOnTheCpu() {
        try (Model m = Model.load(Zoo.path("raise.so"));
                Session s = m.newSession(new SessionOptions().openclDevice(99))) {
            assertEquals(Device.cpu(), s.device());
            assertTrue(s.device().isCpu());
            assertEquals("cpu(0)", s.device().toString());
        }
    }
}
