package org.mote;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/** Java code as functions Mote calls: the zoo's packed model, globals, errors. */
class CallbackTest {
    @AfterEach
    void restore() {
        Zoo.registerScaleShift();
    }

    static void runPacked(Session s) throws Exception {
        try (Tensor x = Zoo.npz("packed.main.inputs.npz", "arg").get(0).toTensor();
             Tensor out = s.run("main", x)[0]) {
            Zoo.assertClose("packed", out, Zoo.npz("packed.main.expected.npz", "out").get(0), 1e-5, 1e-5);
        }
    }

    /** The packed model calls mote.zoo.scale_shift, implemented in Java, on 1 and 2 threads. */
    @Test
    void packedModelCallsJava() throws Exception {
        Set<String> threads = ConcurrentHashMap.newKeySet();
        Function.register("mote.zoo.scale_shift", args -> {
            threads.add(Thread.currentThread().getName());
            return Zoo.scaleShift(args);
        });
        try (Model m = Model.load(Zoo.path("packed.so"))) {
            for (int t : new int[] {1, 2}) {
                try (Session s = m.newSession(new SessionOptions().threads(t).poisonMemory(true))) {
                    runPacked(s);
                    runPacked(s);
                }
            }
        }
        assertTrue(!threads.isEmpty(), "the Java callback ran");
    }

    /** Without the function the model names, loading or calling fails with a typed error. */
    @Test
    void missingFunction() throws Exception {
        assertTrue(Function.unregister("mote.zoo.scale_shift"));
        MoteException e = assertThrows(MoteException.class, () -> {
            try (Model m = Model.load(Zoo.path("packed.so")); Session s = m.newSession()) {
                runPacked(s);
            }
        });
        assertTrue(e.getMessage().contains("mote.zoo.scale_shift"), e.getMessage());
    }

    /** A callback that throws: its message surfaces in the Mote exception, the JVM goes on. */
    @Test
    void throwingCallback() throws Exception {
        Function.register("mote.zoo.scale_shift", args -> {
            throw new IllegalArgumentException("scale_shift refuses from Java");
        });
        try (Model m = Model.load(Zoo.path("packed.so")); Session s = m.newSession()) {
            for (int i = 0; i < 3; i++) {
                MoteException e = assertThrows(MoteException.class, () -> runPacked(s));
                assertTrue(e instanceof KernelException || e instanceof CallbackException, e.toString());
                assertTrue(e.getMessage().contains("scale_shift refuses from Java"), e.getMessage());
            }
            Zoo.registerScaleShift();
            runPacked(s);
        }
    }

    /** convertFunc, getFunction and call: a Java function called through Mote by name. */
    @Test
    void globals() {
        Function twice = Function.convertFunc(args -> ((Long) args[0]) * 2);
        assertEquals(42L, twice.call(21L));
        Function byName = Function.getFunction(twice.name());
        assertNotNull(byName);
        assertEquals(10L, byName.pushArg(5).invoke());
        Function echo = Function.convertFunc(args -> args.length == 0 ? null : args[args.length - 1]);
        assertEquals("hi", echo.call(1L, "hi"));
        assertEquals(2.5, echo.call(2.5));
        assertEquals(true, echo.call(true));
        assertNull(echo.call());
        try (Tensor t = Tensor.of(new float[] {1, 2, 3}, 3)) {
            Object r = echo.call(t);
            assertTrue(r instanceof NDArray, String.valueOf(r));
            try (NDArray back = (NDArray) r) {
                assertEquals(List.of(1f, 2f, 3f), List.of(back.asFloatArray()[0], back.asFloatArray()[1], back.asFloatArray()[2]));
            }
        }
        Function boom = Function.convertFunc(args -> {
            throw new IllegalStateException("boom " + args.length);
        });
        CallbackException e = assertThrows(CallbackException.class, () -> boom.call(1L, 2L));
        assertTrue(e.getMessage().contains("boom 2"), e.getMessage());
        twice.release();
        echo.release();
        boom.release();
        assertNull(Function.getFunction(twice.name()));
    }

    /** A callback called on a native thread the JVM has never seen is attached and runs. */
    @Test
    void callbackOnANativeThread() {
        Set<Thread> seen = ConcurrentHashMap.newKeySet();
        Function f = Function.convertFunc(args -> {
            seen.add(Thread.currentThread());
            return ((Long) args[0]) + 1;
        });
        for (int i = 0; i < 5; i++) {
            assertEquals(8L + i, TestHooks.globalCallOnNewThread(f.name(), 7L + i));
        }
        assertEquals(5, seen.size(), "five new threads");
        assertTrue(!seen.contains(Thread.currentThread()));
        Function boom = Function.convertFunc(args -> {
            throw new UnsupportedOperationException("not on this thread");
        });
        CallbackException e = assertThrows(CallbackException.class,
                () -> TestHooks.globalCallOnNewThread(boom.name(), 1L));
        assertTrue(e.getMessage().contains("not on this thread"), e.getMessage());
        f.release();
        boom.release();
    }
}
