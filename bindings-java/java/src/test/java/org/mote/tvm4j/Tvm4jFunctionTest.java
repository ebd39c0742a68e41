package org.mote.tvm4j;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.atomic.AtomicReference;
import org.mote.CallbackException;
import org.junit.jupiter.api.Test;

/** tvm4j's Function and TVMValue on Mote: what tvm4j's FunctionTest checks, and more. */
class Tvm4jFunctionTest {
    private static final java.util.concurrent.atomic.AtomicInteger NAMES = new java.util.concurrent.atomic.AtomicInteger();

    private static String fresh(String base) {
        return "tvm4j.test." + base + "." + NAMES.incrementAndGet();
    }

    @Test
    void registeredCallbackSumsLongs() {
        String name = fresh("sum");
        Function.register(name, new Function.Callback() {
            @Override
            public Object invoke(TVMValue... args) {
                long s = 0;
                for (TVMValue a : args) {
                    s += a.asLong();
                }
                return s;
            }
        });
        Function f = Function.getFunction(name);
        assertNotNull(f);
        TVMValue r = f.pushArg(10).pushArg(20L).pushArg(12).invoke();
        assertTrue(r instanceof TVMValueLong);
        assertEquals(42, r.asLong());
        assertThrows(UnsupportedOperationException.class, r::asString);
        r.release();
        r.release();
        f.release();
        // A reference released: the registration stays.
        assertNotNull(Function.getFunction(name));
        assertEquals(7, Function.getFunction(name).call(3, 4L).asLong());
    }

    @Test
    void registeringATakenNameNeedsOverride() {
        String name = fresh("taken");
        Function.register(name, args -> 1L);
        assertThrows(IllegalStateException.class, () -> Function.register(name, args -> 2L));
        assertEquals(1, Function.getFunction(name).invoke().asLong());
        Function.register(name, args -> 2L, true);
        assertEquals(2, Function.getFunction(name).invoke().asLong());
    }

    @Test
    void missingGlobalFunctionIsNull() {
        assertNull(Function.getFunction(fresh("missing")));
    }

    @Test
    void convertFuncConcatenatesStrings() {
        Function f = Function.convertFunc(args -> {
            StringBuilder b = new StringBuilder();
            for (TVMValue a : args) {
                b.append(a.asString());
            }
            return b.toString();
        });
        TVMValue r = f.pushArg("Hello").pushArg(" ").pushArg("World!").invoke();
        assertTrue(r instanceof TVMValueString);
        assertEquals("Hello World!", r.asString());
        assertEquals("ab", f.call("a", new TVMValueString("b")).asString());
        r.release();
        f.release();
    }

    @Test
    void bytesGoInAndComeBack() {
        Function f = Function.convertFunc(args -> {
            byte[] out = new byte[args.length + 1];
            for (int i = 0; i < args.length; i++) {
                byte[] b = args[i].asBytes();
                out[0] += b.length > 0 ? b[0] : 0;
                out[i + 1] = (byte) b.length;
            }
            return out;
        });
        TVMValue r = f.pushArg(new byte[] {1}).pushArg(new byte[] {2, 3}).invoke();
        assertTrue(r instanceof TVMValueBytes);
        assertArrayEquals(new byte[] {3, 1, 2}, r.asBytes());
        // Empty and large byte strings, through call() and a TVMValueBytes.
        byte[] big = new byte[1 << 16];
        big[0] = 5;
        assertArrayEquals(new byte[] {5, 0, 0}, f.call(new byte[0], new TVMValueBytes(big)).asBytes());
        r.release();
        f.release();
    }

    @Test
    void callbackTakesTensorsAndReturnsADouble() {
        final long[] shape = {2, 1};
        AtomicReference<TVMValue> seen = new AtomicReference<>();
        Function f = Function.convertFunc(args -> {
            double sum = 0;
            for (TVMValue a : args) {
                seen.set(a);
                Tensor copy = Tensor.empty(shape, new TVMType("float32"));
                TensorBase same = a.asTensor().copyTo(copy);
                assertTrue(same == copy);
                for (float v : copy.asFloatArray()) {
                    sum += v;
                }
                copy.release();
            }
            return sum;
        });
        Tensor arr = Tensor.empty(shape, new TVMType("float32"));
        arr.copyFrom(new float[] {2f, 3f});
        TVMValue r = f.pushArg(arr).pushArg(arr).invoke();
        assertTrue(r instanceof TVMValueDouble);
        assertEquals(10.0, r.asDouble(), 1e-6);
        // The callback's array was a view Mote freed when the callback returned.
        assertTrue(((TensorBase) seen.get()).isView);
        assertThrows(IllegalStateException.class, () -> ((Tensor) seen.get()).asFloatArray());
        // The caller's array is untouched and still usable.
        assertArrayEquals(new float[] {2f, 3f}, arr.asFloatArray(), 0f);
        arr.release();
        f.release();
    }

    @Test
    void callbackReturnsAFunctionThatIsThenCalled() {
        Function outer = Function.convertFunc(args -> {
            final long y = args[0].asLong();
            return Function.convertFunc(inner -> inner[0].asLong() + y);
        });
        TVMValue v = outer.pushArg(10).invoke();
        assertTrue(v instanceof Function);
        Function add10 = v.asFunction();
        assertEquals(30, add10.pushArg(20).invoke().asLong());
        assertEquals(15, add10.call(5).asLong());
        add10.release();
        outer.release();
    }

    @Test
    void aFunctionIsPassedToACallback() {
        Function twice = Function.convertFunc(args -> args[0].asLong() * 2);
        Function apply = Function.convertFunc(args -> args[0].asFunction().call(args[1]).asLong() + 1);
        assertEquals(43, apply.pushArg(twice).pushArg(21).invoke().asLong());
        assertEquals(43, apply.call(twice, 21L).asLong());
        apply.release();
        twice.release();
    }

    @Test
    void callbackReturnsBooleansNullsAndValues() {
        Function f = Function.convertFunc(args -> {
            switch ((int) args[0].asLong()) {
                case 0: return null;
                case 1: return Boolean.TRUE;
                case 2: return new TVMValueDouble(1.5);
                case 3: return 7;
                default: return 2.5f;
            }
        });
        assertTrue(f.call(0).getClass() == TVMValueNull.class);
        assertEquals(1, f.call(1).asLong());
        assertEquals(1.5, f.call(2).asDouble(), 0);
        assertEquals(7, f.call(3).asLong());
        assertEquals(2.5, f.call(4).asDouble(), 0);
        f.release();
    }

    @Test
    void callbackExceptionFailsTheCall() {
        Function f = Function.convertFunc(args -> {
            throw new IllegalStateException("boom from java");
        });
        CallbackException e = assertThrows(CallbackException.class, () -> f.call(1));
        assertTrue(e.getMessage().contains("boom from java"), e.getMessage());
        f.release();
    }

    @Test
    void returningAModuleFunctionOrAModuleIsAClearError() {
        Function f = Function.convertFunc(args -> new Object());
        CallbackException e = assertThrows(CallbackException.class, () -> f.call());
        assertTrue(e.getMessage().contains("the callback's return value"), e.getMessage());
        assertTrue(!e.getMessage().contains("argument 0"), e.getMessage());
        f.release();
        Function g = Function.convertFunc(args -> 1L);
        assertThrows(IllegalArgumentException.class, () -> g.pushArg(Device.cpu()));
        assertThrows(IllegalArgumentException.class, () -> g.call(new Object()));
        g.release();
    }

    @Test
    void releaseSemantics() {
        Function f = Function.convertFunc(args -> 1L);
        String name = f.moteFunction().name();
        assertNotNull(Function.getFunction(name));
        f.release();
        f.release(); // a second release does nothing
        assertNull(Function.getFunction(name)); // the converted callback is unregistered
        IllegalStateException e = assertThrows(IllegalStateException.class, f::invoke);
        assertTrue(e.getMessage().contains("released"), e.getMessage());
        assertThrows(IllegalStateException.class, () -> f.pushArg(1));
        assertThrows(IllegalStateException.class, () -> f.call());
    }

    @Test
    void apiCachesGlobalFunctions() {
        String name = fresh("api");
        assertNull(API.get(name));
        Function.register(name, args -> 5L);
        assertEquals(5, APIInternal.get(name).invoke().asLong());
        assertTrue(API.get(name) == API.get(name));
    }
}
