package org.mote;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * The corrupted-file corpus (docs/fuzzing.md, "Corrupted files") through the Java API. The
 * corpus is the folder the fuzz crate's {@code corrupt} writes (cut copies of the zoos' files
 * and copies with bytes changed inside their module blob, VM executable and region
 * descriptions), named by the system property {@code mote.corrupt}: scripts/test-java.sh
 * passes MOTE_CORRUPT_DIR, or writes a corpus when that is unset.
 *
 * <p>Every copy is loaded with {@link Model#load(String)} ({@code .so} copies: their code is
 * never changed) and with {@link Model#load(String, boolean)} code-free (every copy). A load
 * that succeeds gets a session and both are closed; a load (or session) that fails must throw
 * one of the 20 {@link MoteException} subclasses with a message. A caught Rust panic
 * ({@code IllegalStateException}), any other exception, an {@link Error} or a JVM crash fails.
 * The list is swept twice: after each pass no mapping of a corpus file is left, the open
 * descriptors are the same after both passes, and no native tensor is left behind.
 */
class CorruptFilesTest {
    private static final int PASSES = 2;

    static Path corpus() {
        String d = System.getProperty("mote.corrupt", "");
        if (d.isEmpty()) {
            fail("the system property mote.corrupt is not set: run scripts/test-java.sh (MOTE_CORRUPT_DIR names"
                    + " the corrupted-file corpus; the script writes one when it is unset)");
        }
        Path p = Paths.get(d);
        if (!Files.isRegularFile(p.resolve("corpus.tsv"))) {
            fail("mote.corrupt=" + d + " has no corpus.tsv (scripts/test-corrupt.sh's corpus writer makes it)");
        }
        return p;
    }

    /** The copies' file names: the first column of corpus.tsv. */
    static List<String> copies(Path dir) throws IOException {
        List<String> out = new ArrayList<>();
        for (String line : Files.readAllLines(dir.resolve("corpus.tsv"))) {
            int tab = line.indexOf('\t');
            if (tab > 0) {
                out.add(line.substring(0, tab));
            }
        }
        return out;
    }

    /**
     * The open descriptors, each as "fd -> target", without the listing's own and without the
     * JVM's transient reads of {@code /sys} and {@code /proc} (its container support reopens
     * cgroup files such as {@code memory.limit_in_bytes} at its own pace; Mote opens neither).
     */
    static List<String> openFds() throws IOException {
        List<String> out = new ArrayList<>();
        Path fds = Paths.get("/proc/self/fd");
        Path listing = fds.toRealPath();
        try (Stream<Path> s = Files.list(fds)) {
            for (Path p : s.collect(Collectors.toList())) {
                Path target;
                try {
                    target = Files.readSymbolicLink(p);
                } catch (IOException e) {
                    continue; // closed since it was listed
                }
                if (!target.equals(listing) && !target.startsWith("/sys/") && !target.startsWith("/proc/")) {
                    out.add(p.getFileName() + " -> " + target);
                }
            }
        }
        return out;
    }

    /** Lines of /proc/self/maps naming a file under {@code dir}: libraries left loaded. */
    static List<String> corpusMappings(Path dir) throws IOException {
        String prefix = dir.toRealPath() + "/";
        return Files.readAllLines(Paths.get("/proc/self/maps")).stream()
                .filter(l -> l.contains(prefix)).collect(Collectors.toList());
    }

    /** Outcome counts ("mapped: loaded", "code-free: FormatException"...) and failures. */
    static final class Tally {
        final Map<String, Integer> outcomes = new TreeMap<>();
        final List<String> failures = new ArrayList<>();
        int loaded;

        void count(String key) {
            outcomes.merge(key, 1, Integer::sum);
        }

        /** Whether {@code t} is a typed Mote error with a message; records it either way. */
        void thrown(String what, String mode, Throwable t) {
            boolean typed = t instanceof MoteException && t.getClass() != MoteException.class
                    && t.getClass().getPackage() == MoteException.class.getPackage();
            String msg = t.getMessage();
            count(mode + ": " + t.getClass().getSimpleName());
            if (!typed || msg == null || msg.isEmpty()) {
                failures.add(what + " (" + mode + "): " + t);
            }
        }
    }

    static void one(Tally tally, String path, String copy, boolean codeFree) {
        String mode = codeFree ? "code-free" : "mapped";
        Model model;
        try {
            model = codeFree ? Model.load(path, true) : Model.load(path);
        } catch (Throwable t) {
            tally.thrown(copy, mode, t);
            return;
        }
        try (Model m = model) {
            tally.count(mode + ": loaded");
            tally.loaded++;
            try (Session s = m.newSession()) {
                assertFalse(s.isClosed());
            } catch (Throwable t) {
                tally.thrown(copy, mode + " session", t);
            }
        }
    }

    @Test
    void everyCopyLoadsOrThrowsATypedException() throws Exception {
        Path dir = corpus();
        List<String> copies = copies(dir);
        assertFalse(copies.isEmpty(), "no copies listed in " + dir.resolve("corpus.tsv"));
        long tensorsBefore = TestHooks.liveTensors();
        Tally tally = new Tally();
        List<List<String>> fds = new ArrayList<>();
        long start = System.nanoTime();
        for (int pass = 1; pass <= PASSES; pass++) {
            long t0 = System.nanoTime();
            for (String copy : copies) {
                String path = dir.resolve(copy).toString();
                if (copy.endsWith(".so")) {
                    one(tally, path, copy, false);
                }
                one(tally, path, copy, true);
            }
            List<String> left = corpusMappings(dir);
            assertTrue(left.isEmpty(), "pass " + pass + ": corpus files still mapped: " + left);
            fds.add(openFds());
            System.out.printf("corrupt files (java) pass %d: %d copies in %.1f s, %d descriptors%n", pass,
                    copies.size(), (System.nanoTime() - t0) / 1e9, fds.get(pass - 1).size());
        }
        if (!tally.failures.isEmpty()) {
            fail(tally.failures.size() + " loads broke the rules, first ones:\n  "
                    + String.join("\n  ", tally.failures.subList(0, Math.min(20, tally.failures.size()))));
        }
        TreeSet<String> opened = new TreeSet<>(fds.get(PASSES - 1));
        opened.removeAll(fds.get(0));
        TreeSet<String> closed = new TreeSet<>(fds.get(0));
        closed.removeAll(fds.get(PASSES - 1));
        assertEquals(fds.get(0).size(), fds.get(PASSES - 1).size(),
                "open descriptors after pass 1 and pass " + PASSES + ": new " + opened + ", gone " + closed);
        assertEquals(tensorsBefore, TestHooks.liveTensors(), "native tensors before and after the sweep");
        assertTrue(tally.loaded > 0, "no copy loaded at all: " + tally.outcomes);
        // Per pass: every outcome count divides evenly, since the passes are the same loads.
        Map<String, Integer> perPass = new TreeMap<>();
        for (Map.Entry<String, Integer> e : tally.outcomes.entrySet()) {
            assertEquals(0, e.getValue() % PASSES, "the passes differ in " + e.getKey() + ": " + tally.outcomes);
            perPass.put(e.getKey(), e.getValue() / PASSES);
        }
        System.out.printf("corrupt files (java): %d copies x %d passes in %.1f s, per pass %s%n", copies.size(),
                PASSES, (System.nanoTime() - start) / 1e9, perPass);
    }
}
