package org.mote;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/**
 * {@link Function#convertFunc} from many threads at once: every function gets a name of its
 * own, and calling it by that name runs its own callback. (The name was once read from the id
 * counter apart from taking an id, so concurrent calls could share a name and the later
 * registration replaced the earlier one's callback.)
 */
class ConvertFuncStressTest {
    static final int THREADS = 16;
    static final int PER_THREAD = 4000;

    @Test
    void namesAreUniqueAndCallbacksTheirOwn() throws Exception {
        ExecutorService pool = Executors.newFixedThreadPool(THREADS);
        CyclicBarrier start = new CyclicBarrier(THREADS);
        CyclicBarrier registered = new CyclicBarrier(THREADS);
        List<Future<List<Function>>> done = new ArrayList<>();
        AtomicInteger wrong = new AtomicInteger();
        for (int t = 0; t < THREADS; t++) {
            final long base = (long) t * PER_THREAD;
            done.add(pool.submit(() -> {
                List<Function> mine = new ArrayList<>(PER_THREAD);
                start.await(60, TimeUnit.SECONDS);
                for (int i = 0; i < PER_THREAD; i++) {
                    final long tag = base + i;
                    mine.add(Function.convertFunc(args -> tag));
                }
                // Every thread has registered all of its functions before any is called, so
                // a registration that replaced another's is seen.
                registered.await(60, TimeUnit.SECONDS);
                for (int i = 0; i < PER_THREAD; i++) {
                    if (!Long.valueOf(base + i).equals(mine.get(i).call())) {
                        wrong.incrementAndGet();
                    }
                }
                return mine;
            }));
        }
        List<Function> all = new ArrayList<>();
        try {
            for (Future<List<Function>> f : done) {
                all.addAll(f.get(300, TimeUnit.SECONDS));
            }
        } finally {
            pool.shutdownNow();
        }
        Set<String> names = new HashSet<>();
        for (Function f : all) {
            names.add(f.name());
        }
        assertEquals(THREADS * PER_THREAD, all.size());
        assertEquals(all.size(), names.size(), (all.size() - names.size()) + " duplicate names");
        assertEquals(0, wrong.get(), "functions that ran another function's callback");
        for (Function f : all) {
            f.release();
        }
        assertNull(Function.getFunction(all.get(0).name()));
        assertNull(Function.getFunction(all.get(all.size() - 1).name()));
    }
}
