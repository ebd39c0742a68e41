package org.mote.tvm4j;

import java.util.HashMap;
import java.util.Map;

/** Global functions by name, looked up once per thread. */
public final class API {
    // Not ThreadLocal.withInitial: Android has it only from API 26.
    private static final ThreadLocal<Map<String, Function>> FUNCS = new ThreadLocal<Map<String, Function>>() {
        @Override
        protected Map<String, Function> initialValue() {
            return new HashMap<>();
        }
    };

    private API() {}

    /**
     * The global function {@code name}.
     *
     * @param name the global name
     * @return the function, or null when none has that name
     */
    public static Function get(final String name) {
        Map<String, Function> m = FUNCS.get();
        Function f = m.get(name);
        if (f == null) {
            f = Function.getFunction(name);
            if (f != null) {
                m.put(name, f);
            }
        }
        return f;
    }
}
