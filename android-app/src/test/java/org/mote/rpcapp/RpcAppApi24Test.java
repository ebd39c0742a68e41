package org.mote.rpcapp;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertNotNull;
import static org.junit.Assert.assertNull;
import static org.junit.Assert.assertTrue;
import static org.robolectric.Shadows.shadowOf;

import android.app.Notification;
import android.content.Context;
import android.content.Intent;
import android.os.Build;
import android.os.PowerManager;
import android.view.View;
import android.widget.Button;
import android.widget.EditText;
import android.widget.RadioButton;
import java.util.ArrayList;
import java.util.List;
import org.junit.Test;
import org.junit.runner.RunWith;
import org.mote.rpc.Server;
import org.robolectric.Robolectric;
import org.robolectric.RobolectricTestRunner;
import org.robolectric.RuntimeEnvironment;
import org.robolectric.android.controller.ActivityController;
import org.robolectric.android.controller.ServiceController;
import org.robolectric.annotation.Config;
import org.robolectric.shadows.ShadowActivity;
import org.robolectric.shadows.ShadowPowerManager;
import org.robolectric.shadows.ShadowService;

/**
 * The app on Android 7.0 (API 24, the minSdk) in Robolectric: the framework there has no
 * notification channels, no {@code startForegroundService}, no typed {@code startForeground}
 * and no POST_NOTIFICATIONS, so a call to any of them that is not behind its
 * {@code Build.VERSION.SDK_INT} test fails here (NoSuchMethodError or NoClassDefFoundError).
 * The JVM is not Android 7.0: {@code java.*} is the desktop JDK's here (bindings-java's use of
 * {@code java.time} is not caught; scripts/build-apk.sh's API check is for that).
 *
 * <p>A test class of its own, run by surefire in a JVM of its own (pom.xml: reuseForks false):
 * another SDK is another Robolectric sandbox, and the JNI library loads in one class loader per
 * JVM only.
 */
@RunWith(RobolectricTestRunner.class)
@Config(sdk = 24)
public class RpcAppApi24Test {
    @Test
    public void theActivityStartsAPlainServiceAndAsksForNoPermission() {
        assertEquals(24, Build.VERSION.SDK_INT);
        ActivityController<MainActivity> controller =
                Robolectric.buildActivity(MainActivity.class).setup();
        MainActivity activity = controller.get();
        List<View> views = new ArrayList<>();
        collect(activity.getWindow().getDecorView(), views);
        List<EditText> fields = new ArrayList<>();
        Button start = null;
        for (View v : views) {
            if (v instanceof EditText) {
                fields.add((EditText) v);
            } else if (v instanceof Button && !(v instanceof RadioButton)
                    && "Start".contentEquals(((Button) v).getText())) {
                start = (Button) v;
            }
        }
        assertEquals(3, fields.size());
        assertNotNull(start);
        fields.get(0).setText("127.0.0.1");
        fields.get(1).setText("0");
        start.performClick(); // startService: startForegroundService is API 26

        ShadowActivity shadow = shadowOf(activity);
        Intent started = shadow.getNextStartedService();
        assertNotNull("Start started no service", started);
        assertEquals(RpcService.class.getName(), started.getComponent().getClassName());
        assertNull("asked for a permission on API 24", shadow.getLastRequestedPermission());
        controller.pause().stop().destroy();
    }

    @Test
    public void theServiceRunsInTheForegroundWithoutAChannelAndStops() throws Exception {
        Context context = RuntimeEnvironment.getApplication();
        ServiceController<RpcService> controller = Robolectric.buildService(RpcService.class,
                RpcService.startIntent(context,
                        new RpcConfig("127.0.0.1", 0, "api24", RpcConfig.Mode.STANDALONE)))
                .create().startCommand(0, 1);
        RpcService service = controller.get();
        RpcAppTest.until("the watchdog starts the server (log:\n" + StatusHub.get().logText()
                + ")", 15, () -> service.currentServer() != null
                && !service.currentServer().isStopped());
        Server server = service.currentServer();
        int port = server.port().orElseThrow();
        assertTrue(RpcAppTest.accepts(port));

        // startForeground without a type, a notification without a channel (low priority
        // instead of the channel's low importance).
        ShadowService shadow = shadowOf(service);
        Notification n = shadow.getLastForegroundNotification();
        assertNotNull("no foreground notification", n);
        assertEquals(1, shadow.getLastForegroundNotificationId());
        assertTrue((n.flags & Notification.FLAG_ONGOING_EVENT) != 0);
        @SuppressWarnings("deprecation")
        int low = Notification.PRIORITY_LOW;
        @SuppressWarnings("deprecation")
        int priority = n.priority;
        assertEquals(low, priority);

        PowerManager.WakeLock lock = ShadowPowerManager.getLatestWakeLock();
        assertNotNull(lock);
        assertTrue(lock.isHeld());

        controller.destroy();
        assertTrue(server.isStopped());
        assertFalse(RpcAppTest.accepts(port));
        assertFalse(lock.isHeld());
    }

    private static void collect(View v, List<View> out) {
        out.add(v);
        if (v instanceof android.view.ViewGroup) {
            android.view.ViewGroup g = (android.view.ViewGroup) v;
            for (int i = 0; i < g.getChildCount(); i++) {
                collect(g.getChildAt(i), out);
            }
        }
    }
}
