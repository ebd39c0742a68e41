package org.mote;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.stream.Collectors;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Models linked into a JNI library of the "app" as TVM system libraries: scripts/test-java.sh
 * links the zoo's {@code syslib/NAME.tar} objects whole into {@code libzoo_syslib.so}, which
 * depends on {@code libmote_java.so} (the way an Android app would ship statically linked
 * models). Loading it runs their constructors, which register the models with Mote; then
 * {@link Model#fromSystemLib} loads each by prefix and every case matches TVM's outputs.
 */
class SystemLibTest {
    /** The models the script links in, with their prefixes. */
    static List<String> models() {
        String linked = System.getProperty("mote.syslibModels", "");
        assertFalse(linked.isEmpty(), "mote.syslibModels is unset: run scripts/test-java.sh");
        return Arrays.asList(linked.split(","));
    }

    @BeforeAll
    static void loadAppLibrary() {
        String lib = System.getProperty("mote.syslibLibrary", "");
        assertFalse(lib.isEmpty(), "mote.syslibLibrary is unset: run scripts/test-java.sh");
        Mote.version(); // libmote_java first, so the app library binds to this copy of Mote
        System.load(lib);
    }

    @Test
    void everyLinkedModelMatchesTvm() throws Exception {
        List<String> names = models();
        List<Zoo.Case> cases = Zoo.cases().stream()
                .filter(c -> names.contains(c.model))
                .collect(Collectors.toList());
        assertTrue(cases.size() >= names.size(), "cases for " + names + ": " + cases.size());
        int checked = 0;
        for (Zoo.Case c : cases) {
            try (Model model = Model.fromSystemLib(c.model + "_")) {
                for (int threads : new int[] {1, 2}) {
                    SessionOptions o = new SessionOptions().threads(threads).poisonMemory(true);
                    try (Session s = model.newSession(o)) {
                        for (String run : new String[] {"first", "second"}) {
                            String what = c + " (system library, " + threads + " threads, " + run + " run)";
                            List<Object> args = ZooTest.args(c, false);
                            try {
                                if (c.expectError != null) {
                                    KernelException e = assertThrows(KernelException.class,
                                            () -> s.call(c.function, args.toArray()), what);
                                    assertTrue(e.getMessage().contains(c.expectError), what + ": " + e.getMessage());
                                } else if (c.mode.equals("stateful")) {
                                    s.setInput(c.function, args.toArray());
                                    s.invokeStateful(c.function);
                                    ZooTest.check(c, what, s.getOutput(c.function), args);
                                } else {
                                    ZooTest.check(c, what, s.call(c.function, args.toArray()), args);
                                }
                                checked++;
                            } finally {
                                ZooTest.closeAll(args);
                            }
                        }
                    }
                }
            }
        }
        assertEquals(cases.size() * 4, checked);
    }

    @Test
    void anUnknownPrefixIsALoadErrorListingTheLinkedOnes() {
        LoadException e = assertThrows(LoadException.class, () -> Model.fromSystemLib("nope_"));
        assertEquals(ErrorCode.LOAD, e.code());
        List<String> missing = new ArrayList<>();
        for (String name : models()) {
            if (!e.getMessage().contains(name + "_")) {
                missing.add(name);
            }
        }
        assertTrue(missing.isEmpty(), "message lists every linked prefix, missing " + missing + ": " + e.getMessage());
    }
}
