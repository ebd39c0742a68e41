package org.mote.rpc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.nio.FloatBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.logging.Handler;
import java.util.logging.Level;
import java.util.logging.LogRecord;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.mote.Function;
import org.mote.Logging;
import org.mote.Pointer;

/**
 * Java code called on threads that Mote created, not Java: the zoo's {@code packed} model calls
 * the global function {@code mote.zoo.scale_shift}, implemented here in Java, while TVM's own
 * Python client runs it through {@link Server} (each session on a native thread of its own).
 * Such a thread is attached to the JVM for the call and must be detached when it ends, else
 * every session would leave a Java thread behind. Mote's log records from those threads reach
 * {@code java.util.logging} the same way.
 */
class CallbackThreadsTest {
    private static final int SESSIONS = 20;

    /** 2x + 1 over {@code args[2]} floats, from {@code args[0]} into {@code args[1]}. */
    private static Object scaleShift(Object... args) {
        int n = (int) (long) (Long) args[2];
        FloatBuffer s = ((Pointer) args[0]).asByteBuffer(4L * n).asFloatBuffer();
        FloatBuffer d = ((Pointer) args[1]).asByteBuffer(4L * n).asFloatBuffer();
        for (int i = 0; i < n; i++) {
            d.put(i, 2 * s.get(i) + 1);
        }
        return null;
    }

    private static boolean hasThreadRun(StackTraceElement[] stack) {
        for (StackTraceElement e : stack) {
            if (e.getClassName().equals("java.lang.Thread") && e.getMethodName().equals("run")) {
                return true;
            }
        }
        return false;
    }

    /**
     * True for a stack taken on the thread itself while Java code runs on it, when no Java code
     * started the thread: there is no {@code Thread.run} below.
     */
    private static boolean startedByNativeCode(StackTraceElement[] stack) {
        return stack.length > 0 && !hasThreadRun(stack);
    }

    static String sessionsScript() {
        Path p = Paths.get(RpcServerTest.clientScript()).resolveSibling("packed_sessions.py");
        if (!Files.isRegularFile(p)) {
            fail("no " + p);
        }
        return p.toString();
    }

    @Test
    void callbacksAndLogRecordsOnMoteSessionThreads(@TempDir Path sandbox) throws Exception {
        Thread testThread = Thread.currentThread();
        Set<Thread> callbackThreads = ConcurrentHashMap.newKeySet();
        List<String> foreignStacks = new CopyOnWriteArrayList<>();
        AtomicInteger calls = new AtomicInteger();
        Function.register("mote.zoo.scale_shift", args -> {
            Thread t = Thread.currentThread();
            callbackThreads.add(t);
            calls.incrementAndGet();
            StackTraceElement[] stack = t.getStackTrace();
            if (t == testThread || !startedByNativeCode(stack)) {
                foreignStacks.add(t.getName() + ": " + java.util.Arrays.toString(stack));
            }
            return scaleShift(args);
        });

        // Mote's records of the uploads ("upload ...", from the session threads).
        Set<Thread> logThreads = ConcurrentHashMap.newKeySet();
        List<String> logForeign = new CopyOnWriteArrayList<>();
        AtomicInteger uploads = new AtomicInteger();
        Handler handler = new Handler() {
            @Override
            public void publish(LogRecord r) {
                String m = r.getMessage();
                if (m != null && m.startsWith("upload \"packed.so\"")) {
                    Thread t = Thread.currentThread();
                    uploads.incrementAndGet();
                    logThreads.add(t);
                    if (t == testThread || !startedByNativeCode(t.getStackTrace())) {
                        logForeign.add(t.getName());
                    }
                }
            }

            @Override
            public void flush() {}

            @Override
            public void close() {}
        };
        Level oldLevel = Logging.LOGGER.getLevel();
        Logging.LOGGER.setLevel(Level.INFO);
        Logging.sync();
        Logging.LOGGER.addHandler(handler);

        ThreadMXBean mx = ManagementFactory.getThreadMXBean();
        Server server = Server.builder().host("127.0.0.1").port(0).key("java-threads")
                .sandbox(sandbox).start();
        try {
            int port = server.port().orElseThrow();
            // Let the JVM's own threads settle (the state thread is not started: no listener).
            Thread.sleep(200);
            int before = mx.getThreadCount();
            Set<Thread> existing = Thread.getAllStackTraces().keySet();
            int exit;
            String out;
            try (RpcServerTest.Py client = new RpcServerTest.Py(sessionsScript(),
                    RpcServerTest.zoo(), "127.0.0.1", Integer.toString(port), "java-threads",
                    Integer.toString(SESSIONS))) {
                exit = client.exit(180);
                out = client.output();
            }
            assertEquals(0, exit, "TVM's client failed:\n" + out);
            assertTrue(out.lines().anyMatch("done"::equals), out);
            RpcServerTest.until("served == " + SESSIONS, 20,
                    () -> server.state().served() == SESSIONS);

            assertEquals(SESSIONS, calls.get(), "one scale_shift call per session");
            assertTrue(foreignStacks.isEmpty(),
                    "callbacks on threads Java started or on the test's thread: " + foreignStacks);
            // One native thread per session, and each is gone (detached) once its session is.
            assertEquals(SESSIONS, callbackThreads.size(), "threads: " + callbackThreads);
            RpcServerTest.until("every callback thread has ended", 10,
                    () -> callbackThreads.stream().noneMatch(Thread::isAlive));
            // No thread that Java did not start is left attached: a leaked one would sit in
            // native code with no Java frames (or none from Thread.run). Java's own new
            // threads (the process reaper) do not count.
            RpcServerTest.until("no attached native thread is left", 10, () -> {
                for (java.util.Map.Entry<Thread, StackTraceElement[]> e
                        : Thread.getAllStackTraces().entrySet()) {
                    if (!existing.contains(e.getKey()) && e.getKey().isAlive()
                            && !hasThreadRun(e.getValue())) {
                        return false;
                    }
                }
                return true;
            });

            assertEquals(SESSIONS, uploads.get(), "one upload record per session");
            assertTrue(logForeign.isEmpty(), "log records on Java threads: " + logForeign);
            assertFalse(logThreads.contains(testThread));
            RpcServerTest.until("every logging thread has ended", 10,
                    () -> logThreads.stream().noneMatch(Thread::isAlive));
            System.out.println("callback threads: " + SESSIONS + " sessions, e.g. "
                    + callbackThreads.iterator().next().getName() + "; JVM threads before "
                    + before + ", after " + mx.getThreadCount());
        } finally {
            server.stop();
            Logging.LOGGER.removeHandler(handler);
            Logging.LOGGER.setLevel(oldLevel);
            Logging.sync();
            Function.register("mote.zoo.scale_shift", CallbackThreadsTest::scaleShift);
        }
    }
}
