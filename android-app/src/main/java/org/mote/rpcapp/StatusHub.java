package org.mote.rpcapp;

import android.os.Handler;
import android.os.Looper;
import java.text.SimpleDateFormat;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Date;
import java.util.List;
import java.util.Locale;

/**
 * The service's status and log, shown by the Activity. One per process ({@link #get}); every
 * method may be called from any thread, and observers are called on the main thread only.
 * The log keeps the last {@link #MAX_LINES} lines.
 */
final class StatusHub {
    /** Receives the status text and the whole log, on the main thread. */
    interface Observer {
        void onStatus(String status, String log);
    }

    static final int MAX_LINES = 300;

    private static final StatusHub INSTANCE = new StatusHub();

    private final Handler main = new Handler(Looper.getMainLooper());
    private final Object lock = new Object();
    private final ArrayDeque<String> lines = new ArrayDeque<>();
    private final List<Observer> observers = new ArrayList<>();
    private final SimpleDateFormat clock = new SimpleDateFormat("HH:mm:ss", Locale.ROOT);
    private String status = "stopped";
    private boolean running;

    static StatusHub get() {
        return INSTANCE;
    }

    void log(String line) {
        synchronized (lock) {
            lines.addLast(clock.format(new Date()) + "  " + line);
            while (lines.size() > MAX_LINES) {
                lines.removeFirst();
            }
        }
        android.util.Log.i("MoteRpc", line);
        publish();
    }

    void setStatus(String s, boolean isRunning) {
        synchronized (lock) {
            status = s;
            running = isRunning;
        }
        publish();
    }

    /** The status text observers get next (the Robolectric tests read it without a looper). */
    String status() {
        synchronized (lock) {
            return status;
        }
    }

    /** The log as observers get it. */
    String logText() {
        synchronized (lock) {
            return String.join("\n", lines);
        }
    }

    boolean running() {
        synchronized (lock) {
            return running;
        }
    }

    /** Adds {@code o} and gives it the current status at once (posted to the main thread). */
    void observe(Observer o) {
        synchronized (lock) {
            observers.add(o);
        }
        publish();
    }

    void unobserve(Observer o) {
        synchronized (lock) {
            observers.remove(o);
        }
    }

    private void publish() {
        main.post(() -> {
            String s;
            String text;
            List<Observer> copy;
            synchronized (lock) {
                s = status;
                text = String.join("\n", lines);
                copy = new ArrayList<>(observers);
            }
            for (Observer o : copy) {
                o.onStatus(s, text);
            }
        });
    }
}
