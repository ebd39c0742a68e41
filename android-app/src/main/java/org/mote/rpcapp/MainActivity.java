package org.mote.rpcapp;

import android.Manifest;
import android.annotation.TargetApi;
import android.app.Activity;
import android.content.Intent;
import android.content.pm.PackageManager;
import android.graphics.Typeface;
import android.os.Build;
import android.os.Bundle;
import android.text.InputType;
import android.view.View;
import android.view.ViewGroup;
import android.widget.Button;
import android.widget.EditText;
import android.widget.LinearLayout;
import android.widget.RadioButton;
import android.widget.RadioGroup;
import android.widget.ScrollView;
import android.widget.TextView;

/**
 * Host, port, key and mode; Start and Stop; the service's live status and log. Plain views
 * built in code, so the app needs no layout resources. minSdk is 24: newer calls sit in
 * {@code @TargetApi} methods behind a {@code Build.VERSION.SDK_INT} test.
 */
public final class MainActivity extends Activity implements StatusHub.Observer {
    static final String PREFS = "rpc";

    private EditText host;
    private EditText port;
    private EditText key;
    private RadioGroup modes;
    private TextView hostLabel;
    private TextView status;
    private TextView log;
    private ScrollView logScroll;
    private Button start;
    private Button stop;

    @Override
    protected void onCreate(Bundle saved) {
        super.onCreate(saved);
        RpcConfig c = RpcConfig.load(getSharedPreferences(PREFS, MODE_PRIVATE));
        int pad = dp(12);

        LinearLayout root = new LinearLayout(this);
        root.setOrientation(LinearLayout.VERTICAL);
        root.setPadding(pad, pad, pad, pad);

        modes = new RadioGroup(this);
        modes.setOrientation(RadioGroup.HORIZONTAL);
        for (RpcConfig.Mode m : RpcConfig.Mode.values()) {
            RadioButton r = new RadioButton(this);
            r.setId(View.generateViewId());
            r.setTag(m);
            r.setText(m.name().toLowerCase(java.util.Locale.ROOT));
            modes.addView(r);
            if (m == c.mode) {
                r.setChecked(true);
            }
        }
        modes.setOnCheckedChangeListener((g, id) -> updateHostLabel());
        root.addView(modes);

        hostLabel = new TextView(this);
        root.addView(hostLabel);
        LinearLayout row = new LinearLayout(this);
        row.setOrientation(LinearLayout.HORIZONTAL);
        host = field(c.host, InputType.TYPE_CLASS_TEXT | InputType.TYPE_TEXT_VARIATION_URI);
        port = field(Integer.toString(c.port), InputType.TYPE_CLASS_NUMBER);
        row.addView(host, new LinearLayout.LayoutParams(0, ViewGroup.LayoutParams.WRAP_CONTENT, 3));
        row.addView(port, new LinearLayout.LayoutParams(0, ViewGroup.LayoutParams.WRAP_CONTENT, 1));
        root.addView(row);

        TextView keyLabel = new TextView(this);
        keyLabel.setText("key");
        root.addView(keyLabel);
        key = field(c.key, InputType.TYPE_CLASS_TEXT);
        root.addView(key);

        LinearLayout buttons = new LinearLayout(this);
        start = new Button(this);
        start.setText("Start");
        start.setOnClickListener(v -> onStart(v));
        stop = new Button(this);
        stop.setText("Stop");
        stop.setOnClickListener(v -> stopService(new Intent(this, RpcService.class)));
        buttons.addView(start);
        buttons.addView(stop);
        root.addView(buttons);

        status = new TextView(this);
        status.setTypeface(Typeface.MONOSPACE);
        status.setTextIsSelectable(true);
        status.setPadding(0, pad, 0, pad);
        root.addView(status);

        log = new TextView(this);
        log.setTypeface(Typeface.MONOSPACE);
        log.setTextSize(11);
        log.setTextIsSelectable(true);
        logScroll = new ScrollView(this);
        logScroll.addView(log);
        root.addView(logScroll, new LinearLayout.LayoutParams(
                ViewGroup.LayoutParams.MATCH_PARENT, 0, 1));

        setContentView(root);
        updateHostLabel();
    }

    @Override
    protected void onResume() {
        super.onResume();
        StatusHub.get().observe(this);
    }

    @Override
    protected void onPause() {
        StatusHub.get().unobserve(this);
        super.onPause();
    }

    @Override
    public void onStatus(String s, String text) {
        status.setText(s);
        log.setText(text);
        logScroll.post(() -> logScroll.fullScroll(View.FOCUS_DOWN));
        boolean running = StatusHub.get().running();
        stop.setEnabled(running);
    }

    private void onStart(View v) {
        RpcConfig c;
        try {
            c = RpcConfig.parse(host.getText().toString(), port.getText().toString(),
                    key.getText().toString(), selectedMode());
        } catch (IllegalArgumentException e) {
            StatusHub.get().log("not started: " + e.getMessage());
            return;
        }
        c.save(getSharedPreferences(PREFS, MODE_PRIVATE).edit());
        // Android 13+ (API 33) asks the user before showing notifications; without the
        // permission the service still runs, but its notification is hidden. Earlier versions
        // show it without asking.
        if (Build.VERSION.SDK_INT >= 33 && checkSelfPermission(
                Manifest.permission.POST_NOTIFICATIONS) != PackageManager.PERMISSION_GRANTED) {
            requestPermissions(new String[] {Manifest.permission.POST_NOTIFICATIONS}, 1);
        }
        Intent service = RpcService.startIntent(this, c);
        if (Build.VERSION.SDK_INT >= 26) {
            startForegroundServiceApi26(service);
        } else {
            // Before Android 8 any started service may call startForeground.
            startService(service);
        }
        stop.setEnabled(true);
    }

    /** Android 8+ (API 26): a service started from here must call startForeground soon. */
    @TargetApi(26)
    private void startForegroundServiceApi26(Intent service) {
        startForegroundService(service);
    }

    private RpcConfig.Mode selectedMode() {
        View r = modes.findViewById(modes.getCheckedRadioButtonId());
        return r == null ? RpcConfig.Mode.STANDALONE : (RpcConfig.Mode) r.getTag();
    }

    private void updateHostLabel() {
        switch (selectedMode()) {
            case TRACKER:
                hostLabel.setText("tracker host : port (this device listens on port "
                        + RpcConfig.LISTEN_PORT_IN_TRACKER_MODE + ")");
                break;
            case PROXY:
                hostLabel.setText("proxy host : port (nothing listens here)");
                break;
            default:
                hostLabel.setText("listen address : port (0.0.0.0 = every interface)");
                break;
        }
    }

    private EditText field(String value, int type) {
        EditText e = new EditText(this);
        e.setSingleLine(true);
        e.setInputType(type);
        e.setText(value);
        return e;
    }

    private int dp(int v) {
        return Math.round(v * getResources().getDisplayMetrics().density);
    }
}
