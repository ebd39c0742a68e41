package org.mote;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.logging.Handler;
import java.util.logging.Level;
import java.util.logging.LogRecord;
import org.junit.jupiter.api.Test;

/** Session options, inputs by name, profiles and logging. */
class OptionsTest {
    @Test
    void threadsAndBackends() {
        try (Model m = Model.load(Zoo.path("mlp.so"))) {
            try (Session s = m.newSession(new SessionOptions().threads(3).backends("cpu"))) {
                assertEquals(3, s.threads());
            }
            try (Session s = m.newSession(new SessionOptions().threads(1))) {
                assertEquals(1, s.threads());
            }
        }
        assertTrue(Mote.backendNames().contains("cpu"), Mote.backendNames().toString());
        assertFalse(Mote.version().isEmpty());
    }

    @Test
    void inputsByName() throws Exception {
        List<Zoo.Npy> in = Zoo.npz("mlp.forward.inputs.npz", "arg");
        Zoo.Npy want = Zoo.npz("mlp.forward.expected.npz", "out").get(0);
        try (Model m = Model.load(Zoo.path("mlp.so")); Session s = m.newSession()) {
            List<String> names = m.paramNames("forward");
            assertEquals(5, names.size(), names.toString());
            Map<String, Tensor> byName = new HashMap<>();
            for (int i = names.size() - 1; i >= 0; i--) {
                byName.put(names.get(i), in.get(i).toTensor());
            }
            try (Tensor out = s.run("forward", byName)[0]) {
                Zoo.assertClose("mlp by name", out, want, 1e-5, 1e-5);
            }
            Tensor extra = byName.remove(names.get(0));
            org.junit.jupiter.api.Assertions.assertThrows(InvalidArgumentException.class, () -> s.run("forward", byName));
            byName.put(names.get(0), extra);
            byName.put("bogus", extra);
            org.junit.jupiter.api.Assertions.assertThrows(InvalidArgumentException.class, () -> s.run("forward", byName));
            byName.values().forEach(Tensor::close);
        }
    }

    @Test
    void profile() throws Exception {
        List<Zoo.Npy> in = Zoo.npz("mlp.forward.inputs.npz", "arg");
        try (Model m = Model.load(Zoo.path("mlp.so"));
             Session s = m.newSession(new SessionOptions().profiling(true));
             Session quiet = m.newSession()) {
            List<Tensor> args = new ArrayList<>();
            for (Zoo.Npy n : in) {
                args.add(n.toTensor());
            }
            s.run("forward", args.toArray(new Tensor[0]))[0].close();
            s.run("forward", args.toArray(new Tensor[0]))[0].close();
            List<ProfileEntry> p = s.profile();
            ProfileEntry matmul = p.stream().filter(e -> e.name().equals("matmul")).findFirst()
                    .orElseThrow(() -> new AssertionError("no matmul in " + p));
            assertEquals(2, matmul.calls(), p.toString());
            assertTrue(matmul.totalNanos() > 0);
            assertTrue(p.stream().anyMatch(e -> e.name().equals("relu")), p.toString());
            assertTrue(s.profile().isEmpty(), "profile() resets");
            quiet.run("forward", args.toArray(new Tensor[0]))[0].close();
            assertTrue(quiet.profile().isEmpty(), "off unless asked");
            args.forEach(Tensor::close);
        }
    }

    /** Native log records reach java.util.logging's org.mote logger. */
    @Test
    void logsGoToJavaUtilLogging() {
        List<LogRecord> got = new ArrayList<>();
        Handler h = new Handler() {
            @Override
            public void publish(LogRecord r) {
                synchronized (got) {
                    got.add(r);
                }
            }

            @Override
            public void flush() {}

            @Override
            public void close() {}
        };
        Level old = Logging.LOGGER.getLevel();
        Logging.LOGGER.addHandler(h);
        Logging.LOGGER.setLevel(Level.FINEST);
        Logging.sync();
        try (Model m = Model.load(Zoo.path("mlp.so"));
             Session s = m.newSession(new SessionOptions().backends("nosuchbackend"))) {
            s.profile();
        } finally {
            Logging.LOGGER.removeHandler(h);
            Logging.LOGGER.setLevel(old);
            Logging.sync();
        }
        synchronized (got) {
            assertFalse(got.isEmpty(), "no record reached java.util.logging");
            assertTrue(got.stream().allMatch(r -> r.getLoggerName().equals("org.mote")));
        }
    }

    static String property(String name) {
        String v = System.getProperty(name, "");
        if (v.isEmpty()) {
            org.junit.jupiter.api.Assertions.fail("the system property " + name + " is not set: run scripts/test-java.sh");
        }
        return v;
    }

    /** A plug-in named in the options is loaded and becomes a backend; a wrong ABI is refused. */
    @Test
    void plugins() {
        try (Model m = Model.load(Zoo.path("mlp.so"))) {
            BackendException e = org.junit.jupiter.api.Assertions.assertThrows(BackendException.class,
                    () -> m.newSession(new SessionOptions().plugins(property("mote.testPluginBadAbi"))));
            assertTrue(e.getMessage().contains("99") || e.getMessage().toLowerCase().contains("abi"), e.getMessage());
            try (Session s = m.newSession(new SessionOptions().plugins(property("mote.testPlugin"))
                    .backends("testplug", "cpu"))) {
                assertTrue(Mote.backendNames().contains("testplug"), Mote.backendNames().toString());
                assertEquals(1, s.run("forward", zeros(2, 16), zeros(32, 16), zeros(32), zeros(8, 32), zeros(8)).length);
            }
        }
    }

    static Tensor zeros(long... shape) {
        return Tensor.empty(shape, "float32");
    }
}
