package org.mote;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.reflect.Constructor;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;

/** Every error path gives its own exception class, and the session goes on afterwards. */
class ErrorsTest {
    static Tensor f32(long... shape) {
        return Tensor.empty(shape, "float32");
    }

    /** The exception classes are one to one with the codes 1..20, in the Rust table's order. */
    @Test
    void everyCodeHasItsClass() throws Exception {
        String[] classes = {"MoteIoException", "LoadException", "FormatException", "UnsupportedException",
            "MissingFunctionsException", "UnknownFunctionException", "ArgumentCountException",
            "MismatchException", "KernelException", "CallbackException", "InvalidArgumentException",
            "NpyException", "VmException", "MoteOutOfMemoryException", "SubgraphException",
            "BackendException", "BusyException", "ResourceExhaustedException", "CancelledException",
            "DeviceException"};
        ErrorCode[] codes = ErrorCode.values();
        assertEquals(20, codes.length, "mote::ErrorCode::ALL has 20 codes");
        assertEquals(classes.length, codes.length);
        assertEquals(ErrorCode.RESOURCE_EXHAUSTED, codes[17]);
        assertEquals(ErrorCode.CANCELLED, codes[18]);
        assertEquals(ErrorCode.DEVICE, codes[19]);
        for (int i = 0; i < classes.length; i++) {
            Class<?> c = Class.forName("org.mote." + classes[i]);
            assertTrue(MoteException.class.isAssignableFrom(c), classes[i]);
            Constructor<?> k = c.getConstructor(String.class);
            MoteException e = (MoteException) k.newInstance("m");
            assertEquals(codes[i], e.code(), classes[i]);
            assertEquals(i + 1, e.code().value(), classes[i]);
        }
    }

    @Test
    void badPath() {
        MoteException e = assertThrows(MoteException.class, () -> Model.load("/nonexistent/model.so"));
        assertTrue(e instanceof MoteIoException || e instanceof LoadException, e.toString());
        assertTrue(e.getMessage().contains("/nonexistent/model.so"), e.getMessage());
        assertThrows(e.getClass(), () -> Module.load("/nonexistent/model.so"));
    }

    @Test
    void notALibrary(@org.junit.jupiter.api.io.TempDir Path dir) throws Exception {
        Path p = dir.resolve("garbage.so");
        Files.write(p, "this is not an ELF file".getBytes("UTF-8"));
        assertThrows(LoadException.class, () -> Model.load(p.toString()));
        assertThrows(LoadException.class, () -> Model.load(Zoo.path("manifest.json")));
    }

    /** A code-free load reads the file as data and refuses a program that calls kernels. */
    @Test
    void codeFreeLoadRefusesCompiledKernels() {
        UnsupportedException e = assertThrows(UnsupportedException.class, () -> Model.load(Zoo.path("mlp.so"), true));
        assertTrue(e.getMessage().contains("not code-free"), e.getMessage());
        try (Model m = Model.load(Zoo.path("mlp.so"), false)) {
            assertTrue(m.functionNames().contains("forward"), m.functionNames().toString());
        }
        assertThrows(MoteIoException.class, () -> Model.load("/nonexistent/model.so", true));
    }

    @Test
    void wrongFunctionName() {
        try (Model m = Model.load(Zoo.path("mlp.so")); Session s = m.newSession()) {
            UnknownFunctionException e = assertThrows(UnknownFunctionException.class, () -> s.run("nope"));
            assertTrue(e.getMessage().contains("forward"), "lists what exists: " + e.getMessage());
            assertThrows(UnknownFunctionException.class, () -> m.paramNames("nope"));
        }
        Module mod = Module.load(Zoo.path("mlp.so"));
        assertThrows(UnknownFunctionException.class, () -> mod.getFunction("nope"));
        Module kernels = Module.load(Zoo.path("kernels.so"));
        assertThrows(UnknownFunctionException.class, kernels::entryFunc, "three kernels, no main");
        mod.release();
        kernels.release();
        assertTrue(Function.getFunction("no.such.global") == null);
    }

    @Test
    void wrongArityShapeDtype() {
        try (Model m = Model.load(Zoo.path("cnn.so")); Session s = m.newSession();
             Tensor x = f32(1, 3, 16, 16); Tensor bad = f32(1, 3, 8, 8);
             Tensor ints = Tensor.empty(new long[] {1, 3, 16, 16}, "int32")) {
            ArgumentCountException a = assertThrows(ArgumentCountException.class, () -> s.run("forward", x, x));
            assertEquals(ErrorCode.ARGUMENT_COUNT, a.code());
            assertThrows(ArgumentCountException.class, () -> s.run("forward"));
            assertThrows(MismatchException.class, () -> s.run("forward", bad));
            assertThrows(MismatchException.class, () -> s.run("forward", ints));
            assertThrows(MismatchException.class, () -> s.call("forward", 3L));
            // The session goes on.
            Tensor[] out = s.run("forward", x);
            assertEquals(1, out.length);
            out[0].close();
        }
    }

    @Test
    void kernelErrors() {
        try (Model m = Model.load(Zoo.path("gemm.so")); Session s = m.newSession();
             Tensor a = f32(64, 32); Tensor b = f32(32, 48); Tensor c = f32(64, 48); Tensor small = f32(63, 32)) {
            KernelException e = assertThrows(KernelException.class, () -> s.call("gemm", a, b));
            assertTrue(e.getMessage().contains("Expected 3 arguments"), e.getMessage());
            e = assertThrows(KernelException.class, () -> s.call("gemm", small, b, c));
            assertTrue(e.getMessage().contains("Invalid A.shape[0]"), e.getMessage());
            assertThrows(InvalidArgumentException.class, () -> s.run("gemm", a, b, c),
                    "run on a kernel library: outputs would be dropped");
            assertEquals(null, s.call("gemm", a, b, c));
        }
    }

    @Test
    void badValues() {
        assertThrows(InvalidArgumentException.class, () -> Tensor.empty(new long[] {2}, "complex128"));
        assertThrows(MismatchException.class, () -> Tensor.empty(new long[] {-1}, "float32"));
        try (Tensor t = f32(4)) {
            assertThrows(MismatchException.class, () -> t.copyFrom(new float[3]));
            assertThrows(MismatchException.class, () -> t.copyFrom(new int[4]));
            assertThrows(MismatchException.class, t::asIntArray);
        }
        try (Model m = Model.load(Zoo.path("mlp.so"))) {
            assertThrows(InvalidArgumentException.class, () -> m.newSession(new SessionOptions().threads(5000)));
            assertThrows(InvalidArgumentException.class, () -> m.newSession(new SessionOptions().threads(-1)));
        }
        assertThrows(IllegalArgumentException.class, () -> Tensor.fromBuffer(ByteBuffer.allocate(64), new long[] {16}, "float32"));
    }

    /** A buffer smaller than the tensor, aligned (wrapped) or not (copied), is a mismatch. */
    @Test
    void bufferTooSmall() {
        ByteBuffer aligned = Tensor.allocateBuffer(256);
        aligned.position(4);
        ByteBuffer off = aligned.slice();
        off.limit(60);
        ByteBuffer small = off.slice();
        MismatchException e = assertThrows(MismatchException.class,
                () -> Tensor.fromBuffer(small, new long[] {16}, "float32"));
        assertTrue(e.getMessage().contains("60 bytes"), e.getMessage());
        assertThrows(MismatchException.class, () -> Tensor.fromBuffer(Tensor.allocateBuffer(60), new long[] {16}, "float32"));
    }

    @Test
    void badPlugin() {
        try (Model m = Model.load(Zoo.path("mlp.so"))) {
            MoteException e = assertThrows(MoteException.class,
                    () -> m.newSession(new SessionOptions().plugins("/nonexistent/libplugin.so")));
            assertTrue(e instanceof BackendException || e instanceof LoadException || e instanceof MoteIoException, e.toString());
        }
    }

    /** A Rust panic inside an entry is an IllegalStateException; the JVM and Mote go on. */
    @Test
    void panicBecomesAnException() {
        for (int i = 0; i < 3; i++) {
            IllegalStateException e = assertThrows(IllegalStateException.class,
                    () -> TestHooks.panicForTest("deliberate panic " + 7));
            assertTrue(e.getMessage().contains("internal error: deliberate panic 7"), e.getMessage());
        }
        try (Tensor t = Tensor.of(new float[] {1, 2}, 2)) {
            assertEquals(2, t.asFloatArray().length);
        }
    }

    @Test
    void statefulErrors() {
        try (Model m = Model.load(Zoo.path("mlp.so")); Session s = m.newSession(); Tensor x = f32(2, 16)) {
            assertThrows(InvalidArgumentException.class, () -> s.invokeStateful("forward"));
            assertThrows(InvalidArgumentException.class, () -> s.getOutput("forward"));
            assertThrows(ArgumentCountException.class, () -> s.setInput("forward", x));
            assertThrows(UnknownFunctionException.class, () -> s.setInput("nope", x));
        }
        try (Model m = Model.load(Zoo.path("gemm.so")); Session s = m.newSession(); Tensor x = f32(64, 32)) {
            assertThrows(InvalidArgumentException.class, () -> s.setInput("gemm", x, x, x));
        }
    }
}
