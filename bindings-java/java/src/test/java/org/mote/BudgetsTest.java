package org.mote;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.File;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.zip.GZIPOutputStream;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Session budgets and load options reach Mote: models written by
 * {@code mote::fuzzing::craft} (through {@link TestHooks#writeCraftedModel}) run past a small
 * budget and throw {@link ResourceExhaustedException} naming it, where the default budgets let
 * the same call finish; a bad value is refused in Java.
 */
class BudgetsTest {
    @TempDir
    static Path dir;

    /** Crafted, code-free model files. */
    static String endless;
    static String counted;
    static String countdown;

    static String craft(Path dir, String name) {
        String p = dir.resolve(name + ".tar").toString();
        TestHooks.writeCraftedModel(name, p);
        return p;
    }

    @BeforeAll
    static void write() {
        endless = craft(dir, "endless_loop");
        counted = craft(dir, "counted_loop");
        countdown = craft(dir, "countdown");
        TestHooks.registerTestArithmetic();
    }

    static LoadOptions codeFree() {
        return new LoadOptions().codeFree(true);
    }

    static void assertBudget(String budget, ResourceExhaustedException e) {
        assertEquals(ErrorCode.RESOURCE_EXHAUSTED, e.code());
        assertTrue(e.getMessage().contains(budget), "names " + budget + ": " + e.getMessage());
    }

    /** (a) An endless loop ends at a small instruction budget, on a Session and on a Module. */
    @Test
    void maxInstructionsEndsAnEndlessLoop() {
        try (Model m = Model.load(endless, codeFree());
             Session s = m.newSession(new SessionOptions().threads(1).maxInstructions(100_000))) {
            for (int i = 0; i < 2; i++) {
                assertBudget("budget of 100000 instructions",
                        assertThrows(ResourceExhaustedException.class, () -> s.call("main")));
            }
        }
        Module mod = Module.load(endless, 1, codeFree(), new SessionOptions().threads(1).maxInstructions(100_000));
        try {
            assertBudget("budget of 100000 instructions",
                    assertThrows(ResourceExhaustedException.class, () -> mod.getFunction("main").invoke()));
        } finally {
            mod.release();
        }
    }

    /** Each budget is passed through: the same call finishes with the defaults, not within it. */
    @Test
    void eachSessionBudgetIsPassedThrough() {
        try (Model loop = Model.load(counted, codeFree()); Model deep = Model.load(countdown, codeFree())) {
            try (Session s = loop.newSession(new SessionOptions().threads(1))) {
                assertEquals(0L, s.call("main", 1000L));
            }
            try (Session s = loop.newSession(new SessionOptions().threads(1).maxInstructions(1000))) {
                assertBudget("max_instructions", assertThrows(ResourceExhaustedException.class, () -> s.call("main", 1000L)));
                assertEquals(0L, s.call("main", 10L), "the session goes on");
            }
            try (Session s = deep.newSession(new SessionOptions().threads(1))) {
                assertEquals(0L, s.call("main", 40L));
            }
            try (Session s = deep.newSession(new SessionOptions().threads(1).maxRegisters(64))) {
                assertBudget("max_registers", assertThrows(ResourceExhaustedException.class, () -> s.call("main", 40L)));
            }
            try (Session s = deep.newSession(new SessionOptions().threads(1).stackBudgetBytes(1024))) {
                assertBudget("stack_budget_bytes", assertThrows(ResourceExhaustedException.class, () -> s.call("main", 40L)));
            }
        }
        // The memory budget: the zoo's mlp allocates its intermediate storage.
        try (Model m = Model.load(Zoo.path("mlp.so"));
             Session s = m.newSession(new SessionOptions().memoryBudgetBytes(64));
             Tensor x = Tensor.empty(new long[] {2, 16}, "float32"); Tensor w1 = Tensor.empty(new long[] {32, 16}, "float32");
             Tensor b1 = Tensor.empty(new long[] {32}, "float32"); Tensor w2 = Tensor.empty(new long[] {8, 32}, "float32");
             Tensor b2 = Tensor.empty(new long[] {8}, "float32")) {
            assertBudget("memory_budget_bytes",
                    assertThrows(ResourceExhaustedException.class, () -> s.run("forward", x, w1, b1, w2, b2)));
        }
    }

    /** Bad values throw at once, never a silent default. */
    @Test
    void nonPositiveBudgetsAreRefused() {
        SessionOptions o = new SessionOptions();
        for (long v : new long[] {0, -1, Long.MIN_VALUE}) {
            assertThrows(InvalidArgumentException.class, () -> o.memoryBudgetBytes(v));
            assertThrows(InvalidArgumentException.class, () -> o.maxRegisters(v));
            assertThrows(InvalidArgumentException.class, () -> o.stackBudgetBytes(v));
            assertThrows(InvalidArgumentException.class, () -> o.maxInstructions(v));
            assertThrows(InvalidArgumentException.class, () -> new LoadOptions().memoryBudgetBytes(v));
        }
    }

    /**
     * (d) The load budget: a gzip-compressed tar of the crafted model inflates past a tiny
     * budget ({@link ResourceExhaustedException}) and loads with the default one, read into
     * memory or mapped.
     */
    @Test
    void loadBudgetAndReadIntoMemory() throws IOException {
        File gz = dir.resolve("endless_loop.tar.gz").toFile();
        try (OutputStream out = new GZIPOutputStream(new FileOutputStream(gz))) {
            out.write(Files.readAllBytes(new File(endless).toPath()));
        }
        String p = gz.getPath();
        for (boolean read : new boolean[] {false, true}) {
            assertBudget("LoadOptions::memory_budget", assertThrows(ResourceExhaustedException.class,
                    () -> Model.load(p, codeFree().readIntoMemory(read).memoryBudgetBytes(1024))));
            assertBudget("LoadOptions::memory_budget", assertThrows(ResourceExhaustedException.class,
                    () -> Module.load(p, 1, codeFree().readIntoMemory(read).memoryBudgetBytes(1024), new SessionOptions())));
            try (Model m = Model.load(p, codeFree().readIntoMemory(read).memoryBudgetBytes(1 << 20))) {
                assertTrue(m.functionNames().contains("main"), m.functionNames().toString());
            }
        }
        // readIntoMemory reaches mote::LoadOptions: Mote refuses it for a load that maps code.
        InvalidArgumentException e = assertThrows(InvalidArgumentException.class,
                () -> Model.load(Zoo.path("mlp.so"), new LoadOptions().readIntoMemory(true)));
        assertTrue(e.getMessage().contains("code-free"), e.getMessage());
        assertThrows(InvalidArgumentException.class,
                () -> Module.load(Zoo.path("mlp.so"), 1, new LoadOptions().readIntoMemory(true), new SessionOptions()));
        // A file read into memory can be deleted at once; the model runs from its copy.
        File copy = dir.resolve("copy.tar").toFile();
        Files.copy(new File(counted).toPath(), copy.toPath());
        try (Model m = Model.load(copy.getPath(), codeFree().readIntoMemory(true))) {
            assertTrue(copy.delete());
            try (Session s = m.newSession(new SessionOptions().threads(1))) {
                assertEquals(0L, s.call("main", 5L));
            }
        }
    }
}
