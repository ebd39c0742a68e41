package org.mote.rpc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.mote.Mote;
import org.mote.UnsupportedException;

/**
 * The org.mote.rpc classes against the inference library (mote-java built without its
 * {@code rpc} feature, system property {@code mote.libraryWithoutRpc}, set by
 * scripts/test-java.sh): starting a server or connecting a client is an
 * {@link UnsupportedException} that says which library to use, every time,
 * {@code Module.enabled("rpc")} is false, and the rest of Mote works. In a JVM of its own ({@link Probe}),
 * since this JVM has loaded the library with the RPC server.
 */
class WithoutRpcTest {
    /** Run in the child JVM: one line per fact, which the test compares. */
    static final class Probe {
        private Probe() {}

        public static void main(String[] args) {
            System.out.println("version " + Mote.version());
            System.out.println("opencl " + Mote.openclStatus().startsWith("OpenCL: "));
            System.out.println("server opencl "
                    + Server.openclStatus().equals(Mote.openclStatus()));
            for (int i = 0; i < 2; i++) {
                try (Server s = Server.builder().port(0).start()) {
                    System.out.println("started on " + s.port());
                } catch (UnsupportedException e) {
                    System.out.println("refused " + e.code() + " "
                            + e.getMessage().equals(Server.WITHOUT_RPC) + " "
                            + (e.getCause() instanceof UnsatisfiedLinkError));
                }
            }
            // The client is absent too, and says so the same way.
            System.out.println("client available " + RemoteSession.isAvailable());
            System.out.println("rpc enabled " + org.mote.tvm4j.Module.enabled("rpc"));
            for (int i = 0; i < 2; i++) {
                try (RemoteSession s = RemoteSession.connect("127.0.0.1", 1, "")) {
                    System.out.println("connected to " + s.peer());
                } catch (UnsupportedException e) {
                    System.out.println("client refused " + e.code() + " "
                            + e.getMessage().equals(RemoteSession.WITHOUT_RPC) + " "
                            + (e.getCause() instanceof UnsatisfiedLinkError));
                }
            }
            try {
                org.mote.tvm4j.rpc.Client.connect("127.0.0.1", 1);
                System.out.println("tvm4j connected");
            } catch (UnsupportedException e) {
                System.out.println("tvm4j client refused " + e.code());
            }
            System.out.println("version again " + Mote.version());
        }
    }

    @Test
    void startingAServerSaysTheLibraryHasNoRpcServerAndMoteGoesOn(@TempDir Path tmp)
            throws IOException, InterruptedException {
        String lib = System.getProperty("mote.libraryWithoutRpc", "");
        if (lib.isEmpty() || !Files.isRegularFile(Paths.get(lib))) {
            fail("the system property mote.libraryWithoutRpc names no library: run"
                    + " scripts/test-java.sh (it builds mote-java without features)");
        }
        String java = Paths.get(System.getProperty("java.home"), "bin", "java").toString();
        Path out = tmp.resolve("probe.txt");
        Path err = tmp.resolve("probe-stderr.txt");
        Process p = new ProcessBuilder(java, "-cp", System.getProperty("java.class.path"),
                "-Dmote.library=" + lib, Probe.class.getName())
                .redirectOutput(out.toFile())
                .redirectError(err.toFile())
                .start();
        if (!p.waitFor(60, TimeUnit.SECONDS)) {
            p.destroyForcibly();
            fail("the probe JVM did not end within 60 s");
        }
        String text = new String(Files.readAllBytes(out), StandardCharsets.UTF_8)
                + "--- stderr:\n" + new String(Files.readAllBytes(err), StandardCharsets.UTF_8);
        assertEquals(0, p.exitValue(), "the probe JVM failed (a crash?):\n" + text);
        List<String> lines = Arrays.asList(new String(Files.readAllBytes(out),
                StandardCharsets.UTF_8).trim().split("\n"));
        String version = "version " + Mote.version();
        assertEquals(Arrays.asList(version, "opencl true", "server opencl true",
                "refused UNSUPPORTED true true", "refused UNSUPPORTED true true",
                "client available false", "rpc enabled false",
                "client refused UNSUPPORTED true true", "client refused UNSUPPORTED true true",
                "tvm4j client refused UNSUPPORTED",
                "version again " + Mote.version()), lines, text);
        assertTrue(RemoteSession.WITHOUT_RPC.contains("org.mote:mote-android-rpc"), RemoteSession.WITHOUT_RPC);
        assertTrue(Server.WITHOUT_RPC.contains("org.mote:mote-android-rpc"), Server.WITHOUT_RPC);
        assertTrue(Server.WITHOUT_RPC.contains("--features rpc"), Server.WITHOUT_RPC);
    }
}
