package org.mote.rpc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.Writer;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.mote.MoteIoException;

/**
 * {@link Server} from Java, with TVM's own Python client, tracker (the venv's python, system
 * property {@code mote.python}, set by scripts/test-java.sh from MOTE_PYTHON) and the zoo's
 * {@code mlp.so} as oracles.
 */
class RpcServerTest {
    static String python() {
        String p = System.getProperty("mote.python", "");
        if (p.isEmpty()) {
            fail("the system property mote.python is not set: run scripts/test-java.sh with"
                    + " MOTE_PYTHON set to the TVM 0.27 venv's python");
        }
        return p;
    }

    static String zoo() {
        String z = System.getProperty("mote.zoo", "");
        if (z.isEmpty() || !Files.isRegularFile(Paths.get(z, "mlp.so"))) {
            fail("the system property mote.zoo names no zoo with mlp.so: set MOTE_ZOO_DIR");
        }
        return z;
    }

    static String clientScript() {
        String s = System.getProperty("mote.rpcClient", "");
        if (s.isEmpty() || !Files.isRegularFile(Paths.get(s))) {
            fail("the system property mote.rpcClient names no rpc_client.py (see pom.xml)");
        }
        return s;
    }

    static void until(String what, long seconds, BooleanSupplier pred) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
        while (!pred.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                fail("not within " + seconds + " s: " + what);
            }
            Thread.sleep(20);
        }
    }

    static int freePort() throws IOException {
        try (ServerSocket s = new ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
            return s.getLocalPort();
        }
    }

    static boolean accepts(int port) {
        try (Socket s = new Socket()) {
            s.connect(new InetSocketAddress("127.0.0.1", port), 1000);
            return true;
        } catch (IOException e) {
            return false;
        }
    }

    /** A python process whose output lines are collected; killed with its children on close. */
    static final class Py implements AutoCloseable {
        final Process process;
        final List<String> lines = new CopyOnWriteArrayList<>();
        final Thread reader;

        Py(String... args) throws IOException {
            List<String> cmd = new ArrayList<>();
            cmd.add(python());
            cmd.addAll(Arrays.asList(args));
            ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true);
            pb.environment().put("PYTHONUNBUFFERED", "1");
            process = pb.start();
            reader = new Thread(() -> {
                try (BufferedReader r = new BufferedReader(new InputStreamReader(
                        process.getInputStream(), StandardCharsets.UTF_8))) {
                    String line;
                    while ((line = r.readLine()) != null) {
                        lines.add(line);
                    }
                } catch (IOException e) {
                    lines.add("(output lost: " + e + ")");
                }
            }, "py-output");
            reader.setDaemon(true);
            reader.start();
        }

        String output() {
            return String.join("\n", lines);
        }

        boolean said(String prefix) {
            for (String l : lines) {
                if (l.startsWith(prefix)) {
                    return true;
                }
            }
            return false;
        }

        void waitFor(String prefix, long seconds) throws InterruptedException {
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
            while (!said(prefix)) {
                if (!process.isAlive() || System.nanoTime() > deadline) {
                    Thread.sleep(200); // let the reader catch the last lines
                    fail("no \"" + prefix + "\" from python (alive: " + process.isAlive()
                            + "); its output:\n" + output());
                }
                Thread.sleep(20);
            }
        }

        int exit(long seconds) throws InterruptedException {
            if (!process.waitFor(seconds, TimeUnit.SECONDS)) {
                fail("python did not finish within " + seconds + " s; its output:\n" + output());
            }
            reader.join(2000);
            return process.exitValue();
        }

        @Override
        public void close() {
            process.descendants().forEach(ProcessHandle::destroyForcibly);
            process.destroyForcibly();
        }
    }

    @Test
    void listenModeServesTvmsPythonClient(@TempDir Path sandbox) throws Exception {
        List<ServerState> seen = new CopyOnWriteArrayList<>();
        Server server = Server.builder().host("127.0.0.1").port(0).key("java-listen")
                .maxSessions(2).sandbox(sandbox).sessionThreads(1)
                .idleTimeout(Duration.ofSeconds(60)).statePollInterval(Duration.ofMillis(20))
                .start();
        try {
            assertEquals(ServerMode.LISTEN, server.mode());
            int port = server.port().orElseThrow();
            assertTrue(port > 0);
            assertEquals(port, server.state().port().orElseThrow());
            server.addStateListener(seen::add);
            ServerState first = server.state();
            assertEquals(0, first.served());
            assertFalse(first.stopped());

            int exit;
            String out;
            try (Py client = new Py(clientScript(), zoo(), "direct", "127.0.0.1",
                    Integer.toString(port), "java-listen")) {
                exit = client.exit(90);
                out = client.output();
            }
            assertEquals(0, exit, "TVM's client failed:\n" + out);
            assertTrue(out.lines().anyMatch(l -> l.startsWith("ok ")), out);
            // The session is over once the server has seen the client's socket close.
            until("served == 1", 10, () -> server.state().served() == 1);
            ServerState after = server.state();
            assertEquals(0, after.active());
            assertEquals(0, after.refused());
            assertFalse(after.trackerConnected());
            System.out.println("rpc listen: " + out.trim() + " ms per forward; " + after);
        } finally {
            server.stop();
        }
        server.stop(); // idempotent
        server.close();
        ServerState end = server.state();
        assertTrue(end.stopped());
        assertTrue(server.isStopped());
        assertEquals(1, end.served());
        assertEquals(0, end.active());
        int port = server.port().orElseThrow();
        assertFalse(accepts(port), "something still listens on " + port + " after stop()");

        // The listener saw the first state, the served session, and the stopped state last,
        // never the same state twice in a row.
        assertFalse(seen.isEmpty());
        assertEquals(0, seen.get(0).served());
        ServerState last = seen.get(seen.size() - 1);
        assertTrue(last.stopped(), seen.toString());
        assertEquals(1, last.served());
        for (int i = 1; i < seen.size(); i++) {
            assertFalse(seen.get(i).equals(seen.get(i - 1)), "repeated state " + seen.get(i));
        }
        // A listener registered after stop gets the stopped state once.
        List<ServerState> late = new CopyOnWriteArrayList<>();
        server.addStateListener(late::add);
        until("the late listener is told", 5, () -> !late.isEmpty());
        Thread.sleep(100);
        assertEquals(Collections.singletonList(end), late);
    }

    @Test
    void trackerModeRegistersServesAndLeaves() throws Exception {
        int trackerPort = freePort();
        try (Py tracker = new Py("-m", "tvm.exec.rpc_tracker", "--host", "127.0.0.1", "--port",
                Integer.toString(trackerPort), "--port-end", Integer.toString(trackerPort + 1))) {
            until("the tracker listens on " + trackerPort, 20, () -> {
                if (!tracker.process.isAlive()) {
                    fail("the tracker exited:\n" + tracker.output());
                }
                return accepts(trackerPort);
            });
            // maxSessions left to its default: one place in tracker mode, as TVM's server offers.
            Server server = Server.builder().port(0).key("java-tracker")
                    .tracker("127.0.0.1:" + trackerPort).start();
            try (Py client = new Py(clientScript(), zoo(), "tracker", "127.0.0.1",
                    Integer.toString(trackerPort), "java-tracker")) {
                assertEquals(ServerMode.TRACKER, server.mode());
                // Registered first, then the one free place (the tracker-mode default) offered.
                until("registered with the tracker, one place offered", 20, () -> {
                    ServerState s = server.state();
                    return s.trackerConnected() && s.trackerRegistrations() >= 1
                            && s.trackerOffers().size() == 1;
                });
                client.waitFor("listed", 30);
                client.waitFor("ran ", 60);
                until("served == 1", 10, () -> server.state().served() == 1);
                ServerState s = server.state();
                assertTrue(s.trackerConnected(), s.toString());
                assertTrue(s.trackerRegistrations() >= 1, s.toString());
                System.out.println("rpc tracker: " + client.lines + "; " + s);

                server.stop();
                ServerState end = server.state();
                assertTrue(end.stopped());
                assertFalse(end.trackerConnected());
                assertTrue(end.trackerOffers().isEmpty());
                assertEquals(1, end.served());
                // The tracker forgets the server.
                try (Writer w = new OutputStreamWriter(client.process.getOutputStream(),
                        StandardCharsets.UTF_8)) {
                    w.write("stopped\n");
                }
                client.waitFor("gone", 30);
                assertEquals(0, client.exit(10), client.output());
            } finally {
                server.stop();
            }
        }
    }

    @Test
    void proxyModeServesThroughTvmsProxy() throws Exception {
        int proxyPort = freePort();
        try (Py proxy = new Py("-m", "tvm.exec.rpc_proxy", "--host", "127.0.0.1", "--port",
                Integer.toString(proxyPort), "--port-end", Integer.toString(proxyPort + 1),
                "--web-port", "0")) {
            until("the proxy listens on " + proxyPort, 20, () -> {
                if (!proxy.process.isAlive()) {
                    fail("the proxy exited:\n" + proxy.output());
                }
                return accepts(proxyPort);
            });
            try (Server server = Server.builder().key("java-proxy")
                    .throughProxy("127.0.0.1:" + proxyPort).start()) {
                assertEquals(ServerMode.PROXY, server.mode());
                assertFalse(server.port().isPresent());
                until("waiting at the proxy", 20, () -> server.state().proxyWaiting());
                int exit;
                String out;
                try (Py client = new Py(clientScript(), zoo(), "direct", "127.0.0.1",
                        Integer.toString(proxyPort), "java-proxy")) {
                    exit = client.exit(90);
                    out = client.output();
                }
                assertEquals(0, exit, "TVM's client failed through the proxy:\n" + out);
                until("served == 1", 10, () -> server.state().served() == 1);
                ServerState s = server.state();
                assertEquals(1, s.proxySessions(), s.toString());
                System.out.println("rpc proxy: " + out.trim() + " ms per forward; " + s);
                server.stop();
                ServerState end = server.state();
                assertTrue(end.stopped());
                assertFalse(end.proxyWaiting());
                assertEquals(1, end.served());
            }
        }
    }

    @Test
    void proxyModeWithoutAProxyReportsTheErrorAndStops() throws Exception {
        int closed = freePort();
        try (Server server = Server.builder().key("java-proxy")
                .throughProxy("127.0.0.1:" + closed).statePollInterval(Duration.ofMillis(10))
                .start()) {
            assertEquals(ServerMode.PROXY, server.mode());
            assertFalse(server.port().isPresent());
            assertFalse(server.address().isPresent());
            until("a proxy error", 10, () -> server.state().proxyLastError().isPresent());
            ServerState s = server.state();
            assertFalse(s.proxyWaiting());
            assertEquals(0, s.proxySessions());
            assertFalse(s.port().isPresent());
            server.stop();
            assertTrue(server.state().stopped());
        } // and close() after stop() does nothing
    }

    @Test
    void listenersAreCalledOnTheStateThreadAndCanBeRemoved() throws Exception {
        AtomicInteger removedCalls = new AtomicInteger();
        AtomicInteger throwingCalls = new AtomicInteger();
        List<String> threads = new CopyOnWriteArrayList<>();
        List<ServerState> kept = new CopyOnWriteArrayList<>();
        StateListener removed = s -> removedCalls.incrementAndGet();
        Server server = Server.builder().statePollInterval(Duration.ofMillis(5)).start();
        int port = server.port().orElseThrow();
        server.addStateListener(s -> {
            throwingCalls.incrementAndGet();
            throw new IllegalStateException("a listener that throws (expected in this test)");
        });
        server.addStateListener(removed);
        server.addStateListener(s -> {
            threads.add(Thread.currentThread().getName());
            kept.add(s);
        });
        until("first states delivered", 5, () -> kept.size() == 1 && removedCalls.get() == 1);
        assertTrue(server.removeStateListener(removed));
        assertFalse(server.removeStateListener(removed));
        // A refused connection changes the state: a peer outside the allow-list is counted.
        // Here the server allows everyone, so make a session instead: connect and close.
        try (Socket s = new Socket("127.0.0.1", port)) {
            s.getOutputStream().write(new byte[] {1, 2, 3, 4});
        }
        until("the ended connection is seen", 10, () -> kept.get(kept.size() - 1).served() == 1);
        server.stop();
        assertTrue(kept.get(kept.size() - 1).stopped(), kept.toString());
        assertEquals(1, removedCalls.get());
        assertTrue(throwingCalls.get() >= 3, "the throwing listener stays registered");
        for (String t : threads) {
            assertEquals("mote-rpc-state", t);
        }
    }

    @Test
    void stopFromAListenerAndFromTwoThreads() throws Exception {
        Server server = Server.builder().statePollInterval(Duration.ofMillis(5)).start();
        List<ServerState> seen = new CopyOnWriteArrayList<>();
        server.addStateListener(s -> {
            seen.add(s);
            server.stop(); // on the state thread: must not wait for itself
        });
        until("stopped from the listener", 10, server::isStopped);
        Thread other = new Thread(server::stop);
        other.start();
        server.stop();
        other.join(5000);
        assertFalse(other.isAlive());
        until("the stopped state delivered", 5,
                () -> !seen.isEmpty() && seen.get(seen.size() - 1).stopped());
    }

    @Test
    void allowListRefusesOtherPeers() throws Exception {
        // Only 192.0.2.1 (a documentation address) may connect: a loopback peer is refused.
        try (Server server = Server.builder().allow("192.0.2.1").start()) {
            try (Socket s = new Socket("127.0.0.1", server.port().orElseThrow())) {
                s.setSoTimeout(5000);
                assertEquals(-1, s.getInputStream().read(), "the server closes the connection");
            }
            until("refused == 1", 5, () -> server.state().refused() == 1);
            assertEquals(0, server.state().served());
        }
    }

    @Test
    void anUncreatableSandboxIsAnIoError(@TempDir Path dir) throws Exception {
        Path file = Files.write(dir.resolve("a-file"), new byte[] {1});
        Path sandbox = file.resolve("sandbox");
        MoteIoException e = assertThrows(MoteIoException.class,
                () -> Server.builder().sandbox(sandbox).start());
        assertTrue(e.getMessage().contains(sandbox.toString()), e.getMessage());
        // An IPv6 address with a scope is accepted (peers are matched by address).
        try (Server s = Server.builder()
                .allow(java.net.Inet6Address.getByAddress("lo", new byte[16], 1)).start()) {
            assertTrue(s.port().isPresent());
        }
    }

    @Test
    void badSettingsAreRefused() throws Exception {
        assertThrows(IllegalArgumentException.class, () -> Server.builder().port(-1));
        assertThrows(IllegalArgumentException.class, () -> Server.builder().port(65536));
        assertThrows(IllegalArgumentException.class, () -> Server.builder().maxSessions(0));
        assertThrows(IllegalArgumentException.class, () -> Server.builder().sessionThreads(0));
        assertThrows(IllegalArgumentException.class,
                () -> Server.builder().idleTimeout(Duration.ofSeconds(-1)));
        assertThrows(IllegalArgumentException.class, () -> Server.builder().tracker("no-port"));
        assertThrows(IllegalArgumentException.class, () -> Server.builder().throughProxy("h:0"));
        assertThrows(IllegalStateException.class,
                () -> Server.builder().tracker("h:1").throughProxy("h:2"));
        assertThrows(IllegalArgumentException.class,
                () -> Server.builder().allow("not-an-ip").start());
        // A port in use: the bind fails with Mote's I/O exception.
        try (ServerSocket taken = new ServerSocket(0, 1,
                java.net.InetAddress.getByName("127.0.0.1"))) {
            MoteIoException e = assertThrows(MoteIoException.class,
                    () -> Server.builder().port(taken.getLocalPort()).start());
            assertTrue(e.getMessage().contains(Integer.toString(taken.getLocalPort())),
                    e.getMessage());
        }
    }
}
