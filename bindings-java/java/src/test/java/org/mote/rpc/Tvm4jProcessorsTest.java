package org.mote.rpc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.OutputStreamWriter;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.mote.tvm4j.rpc.ConnectProxyServerProcessor;
import org.mote.tvm4j.rpc.ConnectTrackerServerProcessor;
import org.mote.tvm4j.rpc.RPCWatchdog;
import org.mote.tvm4j.rpc.StandaloneServerProcessor;

/**
 * tvm4j's server processors ({@code org.mote.tvm4j.rpc}) as tvm4j's Android app drives them:
 * {@code run()} serves one session of TVM's unchanged Python client and returns; each through
 * its own route (a port, TVM's tracker, TVM's proxy). Uses {@link RpcServerTest}'s helpers.
 */
class Tvm4jProcessorsTest {
    /** A watchdog that counts instead of exiting the JVM. */
    static final class CountingWatchdog extends RPCWatchdog {
        final AtomicInteger started = new AtomicInteger();
        final AtomicInteger fired = new AtomicInteger();

        @Override
        public synchronized void startTimeout(int timeout) {
            started.incrementAndGet();
            super.startTimeout(timeout);
        }

        @Override
        protected void terminate() {
            fired.incrementAndGet();
        }
    }

    static Thread runInThread(Runnable r) {
        Thread t = new Thread(r, "processor");
        t.setDaemon(true);
        t.start();
        return t;
    }

    @Test
    void standaloneServesOneSessionThenStops() throws Exception {
        int port = RpcServerTest.freePort();
        StandaloneServerProcessor p = new StandaloneServerProcessor(port);
        // tvm4j binds in the constructor: a second processor on the port is an IOException.
        assertThrows(IOException.class, () -> new StandaloneServerProcessor(port));
        Thread t = runInThread(p);
        try (RpcServerTest.Py client = new RpcServerTest.Py(RpcServerTest.clientScript(),
                RpcServerTest.zoo(), "direct", "127.0.0.1", Integer.toString(port), "")) {
            assertEquals(0, client.exit(90), client.output());
        }
        t.join(TimeUnit.SECONDS.toMillis(20));
        assertFalse(t.isAlive(), "run() did not return after the session");
        assertTrue(p.moteServer().isStopped());
        assertEquals(1, p.moteServer().state().served());
        assertFalse(RpcServerTest.accepts(port), "still listening after run()");
    }

    @Test
    void terminateBeforeOrDuringRunEndsIt() throws Exception {
        StandaloneServerProcessor p = new StandaloneServerProcessor(RpcServerTest.freePort());
        Thread t = runInThread(p);
        Thread.sleep(100);
        assertTrue(t.isAlive(), "run() returned with no session");
        p.terminate();
        t.join(TimeUnit.SECONDS.toMillis(10));
        assertFalse(t.isAlive());
        assertTrue(p.moteServer().isStopped());
        p.run(); // returns at once
        ConnectProxyServerProcessor q = new ConnectProxyServerProcessor("127.0.0.1", 1, "never");
        q.terminate();
        q.run(); // never starts a server
    }

    @Test
    void proxyProcessorServesOneSessionAndCallsTheStartCallback() throws Exception {
        int proxyPort = RpcServerTest.freePort();
        try (RpcServerTest.Py proxy = new RpcServerTest.Py("-m", "tvm.exec.rpc_proxy", "--host",
                "127.0.0.1", "--port", Integer.toString(proxyPort), "--port-end",
                Integer.toString(proxyPort + 1), "--web-port", "0")) {
            RpcServerTest.until("the proxy listens on " + proxyPort, 20, () -> {
                assertTrue(proxy.process.isAlive(), () -> "the proxy exited:\n" + proxy.output());
                return RpcServerTest.accepts(proxyPort);
            });
            ConnectProxyServerProcessor p =
                    new ConnectProxyServerProcessor("127.0.0.1", proxyPort, "tvm4j-proxy");
            AtomicInteger calls = new AtomicInteger();
            p.setStartTimeCallback(calls::incrementAndGet);
            Thread t = runInThread(p);
            // The server must be waiting at the proxy before the client asks for its key.
            Thread.sleep(1500);
            try (RpcServerTest.Py client = new RpcServerTest.Py(RpcServerTest.clientScript(),
                    RpcServerTest.zoo(), "direct", "127.0.0.1", Integer.toString(proxyPort),
                    "tvm4j-proxy")) {
                assertEquals(0, client.exit(90), client.output());
            }
            t.join(TimeUnit.SECONDS.toMillis(20));
            assertFalse(t.isAlive(), "run() did not return after the session");
            assertEquals(1, calls.get());
        }
    }

    @Test
    void trackerProcessorRegistersServesAndStartsTheWatchdog() throws Exception {
        int trackerPort = RpcServerTest.freePort();
        try (RpcServerTest.Py tracker = new RpcServerTest.Py("-m", "tvm.exec.rpc_tracker",
                "--host", "127.0.0.1", "--port", Integer.toString(trackerPort), "--port-end",
                Integer.toString(trackerPort + 1))) {
            RpcServerTest.until("the tracker listens on " + trackerPort, 20, () -> {
                assertTrue(tracker.process.isAlive(), () -> "the tracker exited:\n" + tracker.output());
                return RpcServerTest.accepts(trackerPort);
            });
            CountingWatchdog dog = new CountingWatchdog();
            dog.setDaemon(true);
            dog.start();
            ConnectTrackerServerProcessor p = new ConnectTrackerServerProcessor(
                    "127.0.0.1", trackerPort, "tvm4j-tracker", dog);
            assertTrue(p.port() >= 5001 && p.port() <= ConnectTrackerServerProcessor.MAX_SERVER_PORT);
            Thread t = runInThread(p);
            RpcServerTest.until("a match key offered to the tracker", 20,
                    () -> p.getMatchKey() != null);
            assertTrue(p.getMatchKey().startsWith("tvm4j-tracker"), p.getMatchKey());
            try (RpcServerTest.Py client = new RpcServerTest.Py(RpcServerTest.clientScript(),
                    RpcServerTest.zoo(), "tracker", "127.0.0.1", Integer.toString(trackerPort),
                    "tvm4j-tracker")) {
                client.waitFor("ran ", 90);
                t.join(TimeUnit.SECONDS.toMillis(20));
                assertFalse(t.isAlive(), "run() did not return after the session");
                assertEquals(1, dog.started.get());
                dog.finishTimeout();
                try (Writer w = new OutputStreamWriter(client.process.getOutputStream(),
                        StandardCharsets.UTF_8)) {
                    w.write("stopped\n");
                }
                client.waitFor("gone", 30);
                assertEquals(0, client.exit(10), client.output());
            }
            assertEquals(0, dog.fired.get(), "the watchdog fired after finishTimeout");
        }
    }

    @Test
    void watchdogFiresOnlyWhenNotFinished() throws Exception {
        CountingWatchdog dog = new CountingWatchdog();
        dog.setDaemon(true);
        dog.start();
        dog.startTimeout(50);
        RpcServerTest.until("the watchdog fires", 5, () -> dog.fired.get() == 1);
        dog.startTimeout(60_000);
        dog.finishTimeout();
        Thread.sleep(200);
        assertEquals(1, dog.fired.get());
        dog.startTimeout(100);
        RpcServerTest.until("the watchdog fires again", 5, () -> dog.fired.get() == 2);
    }
}
