package org.mote.rpcapp;

import android.annotation.TargetApi;
import android.app.Notification;
import android.app.NotificationChannel;
import android.app.NotificationManager;
import android.app.PendingIntent;
import android.app.Service;
import android.content.Context;
import android.content.Intent;
import android.content.pm.ServiceInfo;
import android.os.Build;
import android.os.IBinder;
import android.os.PowerManager;
import android.os.SystemClock;
import java.io.File;
import java.net.Inet4Address;
import java.net.InetAddress;
import java.net.NetworkInterface;
import java.net.SocketException;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.TimeUnit;
import org.mote.rpc.Server;
import org.mote.rpc.ServerState;

/**
 * Foreground service that owns Mote's RPC server ({@link Server}, bindings-java/README.md "RPC
 * server") and keeps it running: a watchdog thread starts it, restarts it when it has stopped
 * without being asked to (and retries a failed start with a growing pause), and stops it when
 * the service is destroyed. Its foreground service type is {@code specialUse} (the manifest
 * declares it with its permission and reason; README.md, "Foreground service type", says why).
 * A partial wake lock with a timeout keeps the CPU awake while the watchdog runs, which renews
 * it ({@link KeepAwake}).
 *
 * <p>minSdk is 24: calls to newer APIs sit in {@code @TargetApi} methods, each called behind a
 * {@code Build.VERSION.SDK_INT} test (scripts/build-apk.sh checks the rest against API 24).
 */
public final class RpcService extends Service {
    static final String ACTION_STOP = "org.mote.rpcapp.STOP";

    private static final String CHANNEL = "rpc";
    private static final int NOTIFICATION_ID = 1;

    /**
     * The wake lock's timeout: if the watchdog stops renewing it (stuck, or gone without
     * {@code onDestroy}), Android releases it after this long.
     */
    static final long WAKE_LOCK_TIMEOUT_MS = 10 * 60_000L;

    /** How often the watchdog renews the wake lock (well within the timeout). */
    static final long WAKE_LOCK_RENEW_MS = 60_000L;

    /**
     * The port the server listens on in tracker mode ({@link RpcConfig#LISTEN_PORT_IN_TRACKER_MODE});
     * the Robolectric tests set 0 (any free port: the tracker is told the real one) so that
     * they need not own port 9090 on a shared machine.
     */
    static volatile int trackerModeListenPort = RpcConfig.LISTEN_PORT_IN_TRACKER_MODE;

    private final StatusHub hub = StatusHub.get();
    private Watchdog watchdog; // main thread only
    private KeepAwake keepAwake; // main thread only (the object itself is thread-safe)

    @Override
    public void onCreate() {
        super.onCreate();
        if (Build.VERSION.SDK_INT >= 26) {
            createChannel();
        }
    }

    /** Android 8+ (API 26) posts a notification only on a channel. */
    @TargetApi(26)
    private void createChannel() {
        getSystemService(NotificationManager.class).createNotificationChannel(new NotificationChannel(
                CHANNEL, getString(R.string.channel_name), NotificationManager.IMPORTANCE_LOW));
    }

    @Override
    public int onStartCommand(Intent intent, int flags, int startId) {
        if (intent != null && ACTION_STOP.equals(intent.getAction())) {
            stopSelf();
            return START_NOT_STICKY;
        }
        RpcConfig config = RpcConfig.fromIntent(intent);
        if (config == null) {
            // Restarted by the system after its process was killed (START_STICKY): serve what
            // the user last started.
            config = RpcConfig.load(getSharedPreferences(MainActivity.PREFS, MODE_PRIVATE));
        }
        try {
            Notification n = notification("starting: " + config);
            if (Build.VERSION.SDK_INT >= 34) {
                startForegroundSpecialUse(n);
            } else {
                // Before Android 14 the type needs no permission; from Android 10 this overload
                // means "the manifest's type".
                startForeground(NOTIFICATION_ID, n);
            }
        } catch (IllegalStateException | SecurityException e) {
            // ForegroundServiceStartNotAllowedException (an IllegalStateException) when
            // started from the background.
            hub.log("cannot run in the foreground: " + e);
            stopSelf();
            return START_NOT_STICKY;
        }
        if (keepAwake == null) {
            keepAwake = new KeepAwake(getSystemService(PowerManager.class));
        }
        keepAwake.renew();
        // A new start replaces the running server: the new watchdog waits for the old one to
        // have stopped its server (and freed the port) before starting its own.
        Watchdog previous = watchdog;
        if (previous != null) {
            previous.shutdown();
        }
        hub.log("start: " + config);
        watchdog = new Watchdog(config, previous, keepAwake);
        watchdog.start();
        return START_STICKY;
    }

    @Override
    public void onDestroy() {
        if (watchdog != null) {
            watchdog.shutdown();
            try {
                // Server.stop() waits for running sessions; do not hold the main thread long.
                watchdog.join(2000);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            watchdog = null;
        }
        if (keepAwake != null) {
            keepAwake.release();
            keepAwake = null;
        }
        hub.log("service destroyed");
        super.onDestroy();
    }

    /** Android 14+ (API 34): the type, with its permission FOREGROUND_SERVICE_SPECIAL_USE. */
    @TargetApi(34)
    private void startForegroundSpecialUse(Notification n) {
        startForeground(NOTIFICATION_ID, n, ServiceInfo.FOREGROUND_SERVICE_TYPE_SPECIAL_USE);
    }

    /**
     * The server the watchdog runs now (null while none runs), and how often it restarted one:
     * for the Robolectric tests (android-app/src/test), which stop a server behind the
     * service's back and watch the watchdog replace it. Main thread only.
     */
    Server currentServer() {
        Watchdog w = watchdog;
        return w == null ? null : w.current;
    }

    int restarts() {
        Watchdog w = watchdog;
        return w == null ? 0 : w.restarts;
    }

    /** The wake lock's holder while the service runs (null before and after): for the tests. */
    KeepAwake keepAwake() {
        return keepAwake;
    }

    @Override
    public IBinder onBind(Intent intent) {
        return null;
    }

    private Notification notification(String text) {
        PendingIntent open = PendingIntent.getActivity(this, 0,
                new Intent(this, MainActivity.class).addFlags(Intent.FLAG_ACTIVITY_SINGLE_TOP),
                PendingIntent.FLAG_IMMUTABLE);
        PendingIntent stop = PendingIntent.getService(this, 1,
                new Intent(this, RpcService.class).setAction(ACTION_STOP),
                PendingIntent.FLAG_IMMUTABLE);
        return builder()
                .setSmallIcon(android.R.drawable.stat_sys_upload)
                .setContentTitle(getString(R.string.app_name))
                .setContentText(text)
                .setOngoing(true)
                .setOnlyAlertOnce(true)
                .setContentIntent(open)
                .addAction(new Notification.Action.Builder(null, "Stop", stop).build())
                .build();
    }

    private Notification.Builder builder() {
        if (Build.VERSION.SDK_INT >= 26) {
            return channelBuilder();
        }
        return legacyBuilder();
    }

    @TargetApi(26)
    private Notification.Builder channelBuilder() {
        return new Notification.Builder(this, CHANNEL);
    }

    /**
     * Before Android 8 (API 26) there are no channels: the priority says what the channel's
     * importance says later.
     */
    @SuppressWarnings("deprecation")
    private Notification.Builder legacyBuilder() {
        return new Notification.Builder(this).setPriority(Notification.PRIORITY_LOW);
    }

    private void updateNotification(String text) {
        getSystemService(NotificationManager.class).notify(NOTIFICATION_ID, notification(text));
    }

    /** This device's IPv4 addresses (what a laptop connects to in standalone mode). */
    static List<String> localAddresses() {
        List<String> out = new ArrayList<>();
        try {
            for (NetworkInterface nif : Collections.list(NetworkInterface.getNetworkInterfaces())) {
                if (!nif.isUp() || nif.isLoopback()) {
                    continue;
                }
                for (InetAddress a : Collections.list(nif.getInetAddresses())) {
                    if (a instanceof Inet4Address) {
                        out.add(nif.getName() + " " + a.getHostAddress());
                    }
                }
            }
        } catch (SocketException | NullPointerException e) {
            out.add("(cannot list interfaces: " + e.getMessage() + ")");
        }
        return out;
    }

    /**
     * A partial wake lock that is always held with a timeout ({@link #WAKE_LOCK_TIMEOUT_MS}),
     * so that the CPU cannot be kept awake forever by a service that is stuck or gone. The
     * service acquires it when started; the watchdog renews it every
     * {@link #WAKE_LOCK_RENEW_MS} (and at once if it has run out); {@code onDestroy} releases it
     * for good. Thread-safe: the watchdog and the main thread both use it.
     */
    static final class KeepAwake {
        private final PowerManager.WakeLock lock;
        private long renewedAt; // SystemClock.elapsedRealtime() of the last acquire
        private boolean released;

        KeepAwake(PowerManager pm) {
            lock = pm.newWakeLock(PowerManager.PARTIAL_WAKE_LOCK, "mote:rpc");
            // Not counted: a renewal is an acquire that only moves the timeout.
            lock.setReferenceCounted(false);
        }

        /** Acquires the lock again, with a new timeout; nothing once released. */
        synchronized void renew() {
            if (!released) {
                lock.acquire(WAKE_LOCK_TIMEOUT_MS);
                renewedAt = SystemClock.elapsedRealtime();
            }
        }

        /** Renews the lock when {@link #WAKE_LOCK_RENEW_MS} have passed or it has run out. */
        synchronized void renewIfDue() {
            if (!lock.isHeld() || SystemClock.elapsedRealtime() - renewedAt >= WAKE_LOCK_RENEW_MS) {
                renew();
            }
        }

        synchronized void release() {
            released = true;
            lock.release();
        }
    }

    /**
     * Owns one {@link Server} for one configuration. All of its fields but {@code stopping} and
     * {@code lastError} are touched by its own thread only.
     */
    private final class Watchdog extends Thread {
        private static final long CHECK_MS = 2000;
        private static final long MAX_BACKOFF_MS = 30_000;
        private static final long IDLE_TIMEOUT_MINUTES = 10;

        private final RpcConfig config;
        private final Watchdog previous;
        private final KeepAwake keepAwake;
        private volatile boolean stopping;
        private volatile String lastError = "-";
        private volatile int restarts;
        private volatile Server current; // what currentServer() shows; written here only
        private String lastSummary = "";

        Watchdog(RpcConfig config, Watchdog previous, KeepAwake keepAwake) {
            super("mote-rpc-watchdog");
            this.config = config;
            this.previous = previous;
            this.keepAwake = keepAwake;
        }

        void shutdown() {
            stopping = true;
            interrupt();
        }

        @Override
        public void run() {
            Server server = null;
            try {
                if (previous != null) {
                    previous.join();
                }
                long backoff = 1000;
                while (!stopping) {
                    keepAwake.renewIfDue();
                    if (server == null || server.isStopped()) {
                        if (server != null) {
                            restarts++;
                            hub.log("server stopped unexpectedly; restarting (" + restarts + ")");
                        }
                        server = null;
                        current = null;
                        try {
                            server = startServer();
                            current = server;
                            backoff = 1000;
                        } catch (RuntimeException | LinkageError e) {
                            lastError = "start failed: " + e;
                            hub.log(lastError + "; retrying in " + backoff / 1000 + " s");
                            hub.setStatus(describe(null), true);
                            Thread.sleep(backoff);
                            backoff = Math.min(backoff * 2, MAX_BACKOFF_MS);
                            continue;
                        }
                    }
                    Thread.sleep(CHECK_MS);
                }
            } catch (InterruptedException e) {
                // shutdown(): fall through to stop the server.
            } finally {
                current = null;
                if (server != null) {
                    Thread.interrupted();
                    try {
                        server.stop();
                        hub.log("server stopped");
                    } catch (RuntimeException e) {
                        hub.log("stop failed: " + e);
                    }
                }
                hub.setStatus("stopped (" + config + ")\n" + openclLine(), false);
            }
        }

        private Server startServer() {
            File sandbox = new File(getFilesDir(), "rpc");
            if (!sandbox.isDirectory() && !sandbox.mkdirs()) {
                throw new IllegalStateException("cannot create " + sandbox);
            }
            // The TimeUnit overload: the Duration one needs java.time (API 26).
            Server.Builder b = Server.builder().key(config.key).sandbox(sandbox)
                    .idleTimeout(IDLE_TIMEOUT_MINUTES, TimeUnit.MINUTES);
            switch (config.mode) {
                case STANDALONE:
                    b.host(config.host).port(config.port);
                    break;
                case TRACKER:
                    b.host("0.0.0.0").port(trackerModeListenPort)
                            .tracker(config.address());
                    break;
                case PROXY:
                    b.throughProxy(config.address());
                    break;
                default:
                    throw new IllegalStateException("mode " + config.mode);
            }
            Server s = b.start();
            hub.log("server started: " + s);
            s.addStateListener(this::onState);
            return s;
        }

        /** On the server's "mote-rpc-state" thread. */
        private void onState(ServerState s) {
            boolean isRunning = !s.stopped() || !stopping;
            hub.setStatus(describe(s), isRunning);
            String summary = String.format(Locale.ROOT, "%s %s, %d active, %d served",
                    s.mode().name().toLowerCase(Locale.ROOT),
                    s.address().map(Object::toString).orElse(config.address()),
                    s.active(), s.served());
            // Not once stopping: the service may be gone, and a notification posted then
            // would outlive it.
            if (!stopping && !s.stopped() && !summary.equals(lastSummary)) {
                lastSummary = summary;
                updateNotification(summary);
            }
        }

        private String describe(ServerState s) {
            StringBuilder b = new StringBuilder();
            b.append("config: ").append(config).append('\n');
            if (s == null) {
                b.append("server: not running\n");
            } else {
                b.append("mode: ").append(s.mode().name().toLowerCase(Locale.ROOT))
                        .append(s.stopped() ? " (stopped)" : "").append('\n');
                String where = s.address().map(Object::toString).orElse("- (nothing listens)");
                b.append("address: ").append(where).append('\n');
                b.append(String.format(Locale.ROOT, "sessions: %d active, %d served, %d refused%n",
                        s.active(), s.served(), s.refused()));
                switch (s.mode()) {
                    case TRACKER:
                        b.append(String.format(Locale.ROOT,
                                "tracker: %s, %d registrations, offers %s, last error: %s%n",
                                s.trackerConnected() ? "connected" : "not connected",
                                s.trackerRegistrations(), s.trackerOffers(),
                                s.trackerLastError().orElse("-")));
                        break;
                    case PROXY:
                        b.append(String.format(Locale.ROOT,
                                "proxy: %s, %d sessions, last error: %s%n",
                                s.proxyWaiting() ? "waiting" : "not waiting",
                                s.proxySessions(), s.proxyLastError().orElse("-")));
                        break;
                    default:
                        break;
                }
            }
            b.append("last error: ").append(lastError).append('\n');
            b.append("restarts: ").append(restarts).append('\n');
            b.append("device: ").append(String.join(", ", localAddresses())).append('\n');
            b.append(openclLine());
            return b.toString();
        }
    }

    private static volatile String openclLine;

    /**
     * Whether OpenCL is usable here, for the status: {@code "OpenCL: <device>, ..."} or
     * {@code "OpenCL: none (<reason>)"} ({@link Server#openclStatus()}). Asked once per process
     * (OpenCL lists its devices once), on the first status that shows it: Mote opens
     * {@code libOpenCL} at run time, so the app does not need it to start.
     */
    static String openclLine() {
        String line = openclLine;
        if (line == null) {
            try {
                line = Server.openclStatus();
            } catch (RuntimeException | LinkageError e) {
                line = "OpenCL: unknown (" + e + ")";
            }
            openclLine = line;
        }
        return line;
    }

    static Intent startIntent(Context c, RpcConfig config) {
        Intent i = new Intent(c, RpcService.class);
        config.toIntent(i);
        return i;
    }
}
