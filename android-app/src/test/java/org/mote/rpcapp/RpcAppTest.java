package org.mote.rpcapp;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertNotNull;
import static org.junit.Assert.assertNotSame;
import static org.junit.Assert.assertNull;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;
import static org.robolectric.Shadows.shadowOf;

import android.Manifest;
import android.app.Notification;
import android.app.NotificationChannel;
import android.app.NotificationManager;
import android.content.Context;
import android.content.Intent;
import android.content.pm.ServiceInfo;
import android.os.PowerManager;
import android.view.View;
import android.view.ViewGroup;
import android.widget.Button;
import android.widget.EditText;
import android.widget.RadioButton;
import android.widget.TextView;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.Writer;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import org.junit.Test;
import org.junit.runner.RunWith;
import org.mote.rpc.Server;
import org.mote.rpc.ServerMode;
import org.mote.rpc.ServerState;
import org.robolectric.Robolectric;
import org.robolectric.RobolectricTestRunner;
import org.robolectric.RuntimeEnvironment;
import org.robolectric.android.controller.ActivityController;
import org.robolectric.android.controller.ServiceController;
import org.robolectric.annotation.Config;
import org.robolectric.shadows.ShadowActivity;
import org.robolectric.shadows.ShadowPowerManager;
import org.robolectric.shadows.ShadowService;
import org.robolectric.shadows.ShadowSystemClock;

/**
 * The RPC app in Robolectric's Android (API 35) with the host build of libmote_java (system
 * property {@code mote.library}); TVM 0.27's own Python client (system property
 * {@code mote.python}) and the zoo's mlp.so with its expected output ({@code mote.zoo}) are
 * the oracles. scripts/test-android-app.sh sets the properties.
 *
 * <p>All tests share one configuration, hence one Robolectric sandbox: the JNI library can be
 * loaded by one class loader only.
 */
@RunWith(RobolectricTestRunner.class)
@Config(sdk = 35)
public class RpcAppTest {
    private static final String KEY = "robolectric";

    // --- Activity ------------------------------------------------------------------------

    @Test
    public void activityShowsItsControlsAndStartsAndStopsTheService() {
        ActivityController<MainActivity> controller =
                Robolectric.buildActivity(MainActivity.class).setup();
        MainActivity activity = controller.get();
        List<View> views = new ArrayList<>();
        collect(activity.getWindow().getDecorView(), views);

        // The mode choice: one radio button per mode, standalone checked (the defaults).
        List<RadioButton> radios = only(views, RadioButton.class);
        assertEquals(3, radios.size());
        for (int i = 0; i < radios.size(); i++) {
            assertEquals(RpcConfig.Mode.values()[i], radios.get(i).getTag());
        }
        RadioButton standalone = radios.get(RpcConfig.Mode.STANDALONE.ordinal());
        RadioButton tracker = radios.get(RpcConfig.Mode.TRACKER.ordinal());
        assertTrue(standalone.isChecked());
        assertEquals("standalone", standalone.getText().toString());

        // Host, port and key with the defaults; Start and Stop.
        List<EditText> fields = only(views, EditText.class);
        assertEquals(3, fields.size());
        EditText host = fields.get(0);
        EditText port = fields.get(1);
        EditText key = fields.get(2);
        assertEquals("0.0.0.0", host.getText().toString());
        assertEquals("9090", port.getText().toString());
        assertEquals("android", key.getText().toString());
        Button start = button(views, "Start");
        Button stop = button(views, "Stop");

        // The label under the modes follows the mode.
        assertNotNull(textStartingWith(views, "listen address : port"));
        tracker.performClick();
        assertNotNull(textStartingWith(views, "tracker host : port"));
        standalone.performClick();
        assertNotNull(textStartingWith(views, "listen address : port"));

        ShadowActivity shadow = shadowOf(activity);
        // A port that is not a number: nothing starts, the log says why.
        port.setText("ninety");
        start.performClick();
        assertNull(shadow.getNextStartedService());
        assertTrue(StatusHub.get().logText(),
                StatusHub.get().logText().contains("not started: port 'ninety' is not a number"));

        // Standalone on loopback, port 0 (any free port).
        host.setText("127.0.0.1");
        port.setText("0");
        key.setText(KEY);
        start.performClick();
        Intent started = shadow.getNextStartedService();
        assertNotNull("Start started no service", started);
        assertEquals(RpcService.class.getName(), started.getComponent().getClassName());
        RpcConfig sent = RpcConfig.fromIntent(started);
        assertNotNull(sent);
        assertEquals("127.0.0.1", sent.host);
        assertEquals(0, sent.port);
        assertEquals(KEY, sent.key);
        assertEquals(RpcConfig.Mode.STANDALONE, sent.mode);
        assertTrue(stop.isEnabled());
        // Android 13+: the notification permission is asked for on the first Start.
        ShadowActivity.PermissionsRequest asked = shadow.getLastRequestedPermission();
        assertNotNull(asked);
        assertEquals(Manifest.permission.POST_NOTIFICATIONS, asked.requestedPermissions[0]);
        // The fields are remembered.
        RpcConfig saved = RpcConfig.load(
                activity.getSharedPreferences(MainActivity.PREFS, Context.MODE_PRIVATE));
        assertEquals(sent.toString(), saved.toString());

        stop.performClick();
        Intent stopped = shadow.getNextStoppedService();
        assertNotNull("Stop stopped no service", stopped);
        assertEquals(RpcService.class.getName(), stopped.getComponent().getClassName());
        controller.pause().stop().destroy();
    }

    // --- Service ---------------------------------------------------------------------------

    @Test
    public void serviceRunsTheServerInTheForegroundAndStopsIt() throws Exception {
        ServiceController<RpcService> controller = startService();
        RpcService service = controller.get();
        Server server = runningServer(service);
        assertEquals(ServerMode.LISTEN, server.mode());
        int port = server.port().orElseThrow();
        assertTrue(port > 0);
        ServerState s = server.state();
        assertFalse(s.stopped());
        assertEquals(port, s.port().orElseThrow());
        assertEquals(0, s.served());
        assertTrue("nothing listens on " + port, accepts(port));

        // In the foreground as type specialUse (API 34+: the overload with the type).
        assertEquals(ServiceInfo.FOREGROUND_SERVICE_TYPE_SPECIAL_USE,
                service.getForegroundServiceType());
        // The foreground notification Android requires, on the channel the service made.
        ShadowService shadow = shadowOf(service);
        Notification n = shadow.getLastForegroundNotification();
        assertNotNull("no foreground notification", n);
        assertEquals(1, shadow.getLastForegroundNotificationId());
        assertEquals("rpc", n.getChannelId());
        assertTrue((n.flags & Notification.FLAG_ONGOING_EVENT) != 0);
        NotificationManager nm = service.getSystemService(NotificationManager.class);
        NotificationChannel channel = nm.getNotificationChannel("rpc");
        assertNotNull("no notification channel", channel);
        assertEquals(NotificationManager.IMPORTANCE_LOW, channel.getImportance());
        // The server's state listener updates it with the address.
        until("the notification shows the port", 10,
                () -> text(shadowOf(nm).getNotification(1)).contains(":" + port + ", 0 active"));
        // The status the Activity shows.
        until("the status shows the address", 10,
                () -> StatusHub.get().status().contains("address: /127.0.0.1:" + port));
        assertTrue(StatusHub.get().running());
        assertOpenClLine(StatusHub.get().status());
        // A partial wake lock is held while the server runs (its timeout: the next test).
        PowerManager.WakeLock lock = ShadowPowerManager.getLatestWakeLock();
        assertNotNull(lock);
        assertTrue(lock.isHeld());
        assertEquals("mote:rpc", shadowOf(lock).getTag());

        controller.destroy();
        assertTrue(server.isStopped());
        assertTrue(server.state().stopped());
        assertFalse("something still listens on " + port + " after the service ended",
                accepts(port));
        assertFalse(lock.isHeld());
        assertNull(service.keepAwake());
        assertFalse(StatusHub.get().running());
        assertTrue(StatusHub.get().status(), StatusHub.get().status().startsWith("stopped ("));
        assertOpenClLine(StatusHub.get().status());
        String log = StatusHub.get().logText();
        assertTrue(log, log.contains("server stopped"));
        assertTrue(log, log.endsWith("service destroyed"));
    }

    /**
     * The status's OpenCL line: where the host has an OpenCL driver registered with the ICD
     * loader (POCL on the test machine: scripts/opencl.sh), it names a device (its name as
     * OpenCL gives it, no "none"); without one, "OpenCL: none (" and the reason.
     */
    static void assertOpenClLine(String status) {
        String line = null;
        for (String l : status.split("\n")) {
            if (l.startsWith("OpenCL: ")) {
                line = l;
            }
        }
        assertNotNull("no OpenCL line in the status:\n" + status, line);
        String[] icds = new java.io.File("/etc/OpenCL/vendors").list();
        boolean driver = icds != null && java.util.Arrays.stream(icds).anyMatch(n -> n.endsWith(".icd"));
        if (driver) {
            assertFalse(line, line.startsWith("OpenCL: none") || line.startsWith("OpenCL: unknown"));
            assertTrue(line, line.length() > "OpenCL: ".length());
        } else {
            assertTrue(line, line.startsWith("OpenCL: none ("));
        }
    }

    @Test
    public void wakeLockHasATimeoutThatTheWatchdogRenewsAndIsReleasedOnStop() throws Exception {
        ServiceController<RpcService> controller = startService();
        RpcService service = controller.get();
        runningServer(service);
        PowerManager.WakeLock lock = ShadowPowerManager.getLatestWakeLock();
        assertNotNull(lock);
        ShadowPowerManager.ShadowWakeLock shadow = shadowOf(lock);
        assertTrue(lock.isHeld());
        assertFalse("a renewal must not count as one more hold", shadow.isReferenceCounted());
        RpcService.KeepAwake keepAwake = service.keepAwake();
        assertNotNull(keepAwake);

        // Robolectric's clock (SystemClock) moves only when told to. The lock has a timeout:
        // with the watchdog kept from renewing it (it renews holding the KeepAwake's monitor),
        // the lock runs out when the clock passes the timeout.
        synchronized (keepAwake) {
            ShadowSystemClock.advanceBy(RpcService.WAKE_LOCK_TIMEOUT_MS - 1, TimeUnit.MILLISECONDS);
            assertTrue("the wake lock ran out before its timeout", lock.isHeld());
            ShadowSystemClock.advanceBy(2, TimeUnit.MILLISECONDS);
            assertFalse("the wake lock has no timeout", lock.isHeld());
        }
        // The watchdog acquires it again at its next check.
        until("the watchdog acquires the wake lock again", 10, lock::isHeld);

        // And renews it every WAKE_LOCK_RENEW_MS, not at every check.
        int held = shadow.getTimesHeld();
        Thread.sleep(2500); // longer than the watchdog's check period
        assertEquals("renewed before WAKE_LOCK_RENEW_MS", held, shadow.getTimesHeld());
        ShadowSystemClock.advanceBy(RpcService.WAKE_LOCK_RENEW_MS, TimeUnit.MILLISECONDS);
        until("the watchdog renews the wake lock", 10, () -> shadow.getTimesHeld() == held + 1);
        // Past the timeout of the acquire before the renewal: still held.
        ShadowSystemClock.advanceBy(RpcService.WAKE_LOCK_TIMEOUT_MS - RpcService.WAKE_LOCK_RENEW_MS
                + 1, TimeUnit.MILLISECONDS);
        assertTrue(lock.isHeld());

        // Released when the service ends, and not acquired again.
        controller.destroy();
        assertFalse(lock.isHeld());
        int last = shadow.getTimesHeld();
        keepAwake.renewIfDue(); // what a late watchdog check would do
        Thread.sleep(2500);
        assertFalse(lock.isHeld());
        assertEquals(last, shadow.getTimesHeld());
    }

    @Test
    public void tvmsPythonClientUploadsRunsAndTimesMlpThroughTheService() throws Exception {
        ServiceController<RpcService> controller = startService();
        RpcService service = controller.get();
        Server server = runningServer(service);
        int port = server.port().orElseThrow();
        try {
            // rpc_client.py (bindings-java's, TVM's client used as is): upload mlp.so, load
            // it, run forward through relax.VirtualMachine, compare with the zoo's expected
            // output, time it with time_evaluator; "ok <mean ms>" and exit 0.
            List<String> out = runPython(90, clientScript(), zoo(), "direct", "127.0.0.1",
                    Integer.toString(port), KEY);
            String last = out.isEmpty() ? "" : out.get(out.size() - 1);
            assertTrue(String.join("\n", out), last.startsWith("ok "));
            double ms = Double.parseDouble(last.substring(3).trim());
            assertTrue(last, ms > 0);
            System.out.println("app-test: TVM's client through the app's server: " + ms
                    + " ms per mlp forward");

            until("served == 1", 10, () -> server.state().served() == 1);
            ServerState s = server.state();
            assertEquals(0, s.active());
            assertEquals(0, s.refused());
            assertFalse(s.stopped());
            until("the status shows one served session", 10,
                    () -> StatusHub.get().status().contains("sessions: 0 active, 1 served, 0 refused"));
            NotificationManager nm = service.getSystemService(NotificationManager.class);
            until("the notification shows one served session", 10,
                    () -> text(shadowOf(nm).getNotification(1)).endsWith("0 active, 1 served"));
            // The watchdog left the healthy server alone.
            assertEquals(0, service.restarts());
            assertEquals(server, service.currentServer());
        } finally {
            controller.destroy();
        }
        assertTrue(server.isStopped());
        assertEquals(1, server.state().served());
        assertFalse(accepts(port));
    }

    @Test
    public void watchdogRestartsAServerThatStoppedBehindItsBack() throws Exception {
        ServiceController<RpcService> controller = startService();
        RpcService service = controller.get();
        Server first = runningServer(service);
        int firstPort = first.port().orElseThrow();
        first.stop(); // not through the service: as if the server had died
        assertFalse(accepts(firstPort));
        until("the watchdog starts a new server", 15, () -> {
            Server s = service.currentServer();
            return s != null && s != first && !s.isStopped();
        });
        Server second = service.currentServer();
        assertNotSame(first, second);
        assertEquals(1, service.restarts());
        int port = second.port().orElseThrow();
        assertTrue("the new server does not listen on " + port, accepts(port));
        assertTrue(StatusHub.get().logText(), StatusHub.get().logText()
                .contains("server stopped unexpectedly; restarting (1)"));
        until("the status counts the restart", 10,
                () -> StatusHub.get().status().contains("restarts: 1")
                        && StatusHub.get().status().contains("address: /127.0.0.1:" + port));

        controller.destroy();
        assertTrue(second.isStopped());
        assertFalse(accepts(port));
        assertNull(service.currentServer());
        Thread.sleep(2500); // longer than the watchdog's check: nothing starts again
        assertNull(service.currentServer());
        assertEquals(0, serversListeningAmong(firstPort, port));
    }

    @Test
    public void aStopActionIntentStopsTheService() throws Exception {
        ServiceController<RpcService> controller = startService();
        RpcService service = controller.get();
        runningServer(service);
        // What the notification's Stop action delivers.
        assertEquals(android.app.Service.START_NOT_STICKY, service.onStartCommand(
                new Intent(service, RpcService.class).setAction(RpcService.ACTION_STOP), 0, 2));
        assertTrue("the Stop action did not stop the service", shadowOf(service).isStoppedBySelf());
        Server server = service.currentServer();
        controller.destroy();
        assertTrue(server == null || server.isStopped());
    }

    @Test
    public void trackerModeRegistersWithTvmsTrackerAndServesThroughIt() throws Exception {
        int trackerPort = freePort();
        RpcService.trackerModeListenPort = 0; // not 9090: the machine may be shared
        try (Py tracker = new Py("-m", "tvm.exec.rpc_tracker", "--host", "127.0.0.1",
                "--port", Integer.toString(trackerPort), "--port-end",
                Integer.toString(trackerPort + 1))) {
            until("TVM's tracker listens on " + trackerPort, 30, () -> {
                if (!tracker.process.isAlive()) {
                    fail("the tracker exited:\n" + tracker.output());
                }
                return accepts(trackerPort);
            });
            Context context = RuntimeEnvironment.getApplication();
            ServiceController<RpcService> controller = Robolectric.buildService(RpcService.class,
                    RpcService.startIntent(context, new RpcConfig("127.0.0.1", trackerPort, KEY,
                            RpcConfig.Mode.TRACKER))).create().startCommand(0, 1);
            RpcService service = controller.get();
            Server server = runningServer(service);
            // Registered, with one place offered per session the server allows.
            until("registered with the tracker, places offered", 20, () -> {
                ServerState st = server.state();
                return st.trackerConnected() && st.trackerRegistrations() >= 1
                        && !st.trackerOffers().isEmpty();
            });
            int offered = server.state().trackerOffers().size();
            // rpc_client.py in tracker mode: waits until the tracker lists the key with those
            // free places, gets a session from tracker.request(KEY), runs and times mlp
            // through it.
            try (Py client = new Py(clientScript(), zoo(), "tracker", "127.0.0.1",
                    Integer.toString(trackerPort), KEY, Integer.toString(offered))) {
                assertEquals(ServerMode.TRACKER, server.mode());
                client.waitFor("listed", 60);
                client.waitFor("ran ", 90);
                until("served == 1", 10, () -> server.state().served() == 1);
                ServerState s = server.state();
                assertTrue(s.toString(), s.trackerConnected());
                assertTrue(s.toString(), s.trackerRegistrations() >= 1);
                until("the status shows the tracker and the session", 10, () -> {
                    String st = StatusHub.get().status();
                    return st.startsWith("config: tracker 127.0.0.1:" + trackerPort)
                            && st.contains("tracker: connected")
                            && st.contains("1 served");
                });
                System.out.println("app-test: through TVM's tracker: " + client.lines);

                // Stopping the service takes the server off the tracker.
                controller.destroy();
                assertTrue(server.isStopped());
                client.say("stopped");
                client.waitFor("gone", 30);
                assertEquals(client.output(), 0, client.exit(10));
            } finally {
                controller.destroy();
            }
        } finally {
            RpcService.trackerModeListenPort = RpcConfig.LISTEN_PORT_IN_TRACKER_MODE;
        }
    }

    // --- helpers -----------------------------------------------------------------------------

    private static ServiceController<RpcService> startService() {
        Context context = RuntimeEnvironment.getApplication();
        Intent intent = RpcService.startIntent(context,
                new RpcConfig("127.0.0.1", 0, KEY, RpcConfig.Mode.STANDALONE));
        return Robolectric.buildService(RpcService.class, intent).create().startCommand(0, 1);
    }

    /** The service's server once the watchdog has started it (the host JNI library loaded). */
    private static Server runningServer(RpcService service) throws InterruptedException {
        until("the watchdog starts the server (log:\n" + StatusHub.get().logText() + ")", 15,
                () -> service.currentServer() != null && !service.currentServer().isStopped());
        return service.currentServer();
    }

    private static int serversListeningAmong(int... ports) {
        int n = 0;
        for (int p : ports) {
            n += accepts(p) ? 1 : 0;
        }
        return n;
    }

    private static String text(Notification n) {
        if (n == null) {
            return "";
        }
        CharSequence t = n.extras.getCharSequence(Notification.EXTRA_TEXT);
        return t == null ? "" : t.toString();
    }

    private static void collect(View v, List<View> out) {
        out.add(v);
        if (v instanceof ViewGroup) {
            ViewGroup g = (ViewGroup) v;
            for (int i = 0; i < g.getChildCount(); i++) {
                collect(g.getChildAt(i), out);
            }
        }
    }

    private static <T> List<T> only(List<View> views, Class<T> type) {
        List<T> out = new ArrayList<>();
        for (View v : views) {
            if (type.isInstance(v)) {
                out.add(type.cast(v));
            }
        }
        return out;
    }

    private static Button button(List<View> views, String label) {
        for (Button b : only(views, Button.class)) {
            if (!(b instanceof RadioButton) && label.contentEquals(b.getText())) {
                return b;
            }
        }
        throw new AssertionError("no button " + label);
    }

    private static TextView textStartingWith(List<View> views, String prefix) {
        for (TextView t : only(views, TextView.class)) {
            if (t.getText().toString().startsWith(prefix)) {
                return t;
            }
        }
        return null;
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

    static boolean accepts(int port) {
        try (Socket s = new Socket()) {
            s.connect(new InetSocketAddress("127.0.0.1", port), 1000);
            return true;
        } catch (IOException e) {
            return false;
        }
    }

    private static String property(String name, String env) {
        String v = System.getProperty(name, "");
        if (v.isEmpty()) {
            fail("the system property " + name + " is not set: run scripts/test-android-app.sh"
                    + " with " + env + " set");
        }
        return v;
    }

    static String zoo() {
        String z = property("mote.zoo", "MOTE_ZOO_DIR");
        if (!Files.isRegularFile(Paths.get(z, "mlp.so"))) {
            fail(z + " has no mlp.so: set MOTE_ZOO_DIR to the x86_64 zoo");
        }
        return z;
    }

    static String clientScript() {
        String s = property("mote.rpcClient", "(pom.xml sets it)");
        if (!Files.isRegularFile(Paths.get(s))) {
            fail("no rpc_client.py at " + s);
        }
        return s;
    }

    static int freePort() throws IOException {
        try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            return s.getLocalPort();
        }
    }

    /** A python process (the venv's) whose output lines are collected; killed on close. */
    static final class Py implements AutoCloseable {
        final Process process;
        final List<String> lines = new CopyOnWriteArrayList<>();

        Py(String... args) throws IOException {
            List<String> cmd = new ArrayList<>();
            cmd.add(property("mote.python", "MOTE_PYTHON"));
            cmd.addAll(List.of(args));
            ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true);
            pb.environment().put("PYTHONUNBUFFERED", "1");
            process = pb.start();
            Thread reader = new Thread(() -> {
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

        void waitFor(String prefix, long seconds) throws InterruptedException {
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
            while (lines.stream().noneMatch(l -> l.startsWith(prefix))) {
                if (!process.isAlive() || System.nanoTime() > deadline) {
                    Thread.sleep(200);
                    fail("no \"" + prefix + "\" from python (alive: " + process.isAlive()
                            + "); its output:\n" + output());
                }
                Thread.sleep(20);
            }
        }

        void say(String line) throws IOException {
            Writer w = new OutputStreamWriter(process.getOutputStream(), StandardCharsets.UTF_8);
            w.write(line + "\n");
            w.flush();
        }

        int exit(long seconds) throws InterruptedException {
            if (!process.waitFor(seconds, TimeUnit.SECONDS)) {
                fail("python did not finish within " + seconds + " s:\n" + output());
            }
            return process.exitValue();
        }

        @Override
        public void close() {
            process.descendants().forEach(ProcessHandle::destroyForcibly);
            process.destroyForcibly();
        }
    }

    /** Runs the venv's python with {@code args}; its output lines, after it exited with 0. */
    static List<String> runPython(long seconds, String... args) throws Exception {
        List<String> cmd = new ArrayList<>();
        cmd.add(property("mote.python", "MOTE_PYTHON"));
        cmd.addAll(List.of(args));
        ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true);
        pb.environment().put("PYTHONUNBUFFERED", "1");
        Process p = pb.start();
        List<String> lines = new CopyOnWriteArrayList<>();
        Thread reader = new Thread(() -> {
            try (BufferedReader r = new BufferedReader(
                    new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8))) {
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
        try {
            if (!p.waitFor(seconds, TimeUnit.SECONDS)) {
                fail("python did not finish within " + seconds + " s:\n" + String.join("\n", lines));
            }
            reader.join(2000);
            assertEquals("python failed:\n" + String.join("\n", lines), 0, p.exitValue());
            return new ArrayList<>(lines);
        } finally {
            p.descendants().forEach(ProcessHandle::destroyForcibly);
            p.destroyForcibly();
        }
    }
}
