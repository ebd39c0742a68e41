package org.mote;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.Enumeration;
import java.util.List;
import java.util.TreeMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.zip.ZipEntry;
import java.util.zip.ZipFile;

/**
 * The zoo (MOTE_ZOO_DIR, passed as the system property mote.zoo), its cases (the manifest as
 * a TSV written by scripts/test-java.sh) and TVM's expected outputs (.npz, read here). Public
 * for the tests of org.mote.rpc, which read the same files.
 */
public final class Zoo {
    private Zoo() {}

    /** One case of the manifest. */
    static final class Case {
        String model, file, kind, name, function, mode, expectError, inputs, expected;
        double rtol, atol;
        List<Integer> outputs, scalars;
        List<String> functions;

        @Override
        public String toString() {
            return model + "." + name;
        }
    }

    /** A .npy array. */
    public static final class Npy {
        /** TVM's name of its element type. */
        public String dtype;
        /** Its shape. */
        public long[] shape;
        /** Its raw elements, little-endian. */
        public byte[] data;

        Tensor toTensor() {
            Tensor t = Tensor.empty(shape, dtype);
            t.copyFromRaw(data);
            return t;
        }
    }

    static Path dir() {
        String d = System.getProperty("mote.zoo", "");
        if (d.isEmpty()) {
            fail("the system property mote.zoo is not set: run scripts/test-java.sh (MOTE_ZOO_DIR names the zoo)");
        }
        return Paths.get(d);
    }

    /**
     * The OpenCL zoo (MOTE_OPENCL_ZOO_DIR, passed as the system property mote.openclZoo).
     *
     * @return its folder
     */
    public static Path openclDir() {
        String d = System.getProperty("mote.openclZoo", "");
        if (d.isEmpty()) {
            fail("the system property mote.openclZoo is not set: run scripts/test-java.sh "
                    + "(MOTE_OPENCL_ZOO_DIR names the OpenCL zoo)");
        }
        return Paths.get(d);
    }

    public static String path(String file) {
        return dir().resolve(file).toString();
    }

    static List<Case> cases() throws IOException {
        String p = System.getProperty("mote.cases", "");
        if (p.isEmpty()) {
            fail("the system property mote.cases is not set: run scripts/test-java.sh");
        }
        List<Case> out = new ArrayList<>();
        for (String line : Files.readAllLines(Paths.get(p))) {
            if (line.isEmpty()) {
                continue;
            }
            String[] f = line.split("\t", -1);
            Case c = new Case();
            c.model = f[0];
            c.file = f[1];
            c.kind = f[2];
            c.name = f[3];
            c.function = f[4];
            c.mode = f[5];
            c.expectError = opt(f[6]);
            c.inputs = opt(f[7]);
            c.expected = opt(f[8]);
            c.rtol = f[9].equals("-") ? 0 : Double.parseDouble(f[9]);
            c.atol = f[10].equals("-") ? 0 : Double.parseDouble(f[10]);
            c.outputs = ints(f[11]);
            c.scalars = ints(f[12]);
            c.functions = f[13].equals("-") ? Collections.emptyList() : Arrays.asList(f[13].split(","));
            out.add(c);
        }
        if (out.isEmpty()) {
            fail("no zoo cases in " + p);
        }
        return out;
    }

    private static String opt(String s) {
        return s.equals("-") ? null : s;
    }

    private static List<Integer> ints(String s) {
        List<Integer> out = new ArrayList<>();
        if (!s.equals("-")) {
            for (String x : s.split(",")) {
                out.add(Integer.parseInt(x));
            }
        }
        return out;
    }

    /** The arrays of a zoo .npz whose keys are prefix0, prefix1..., in index order. */
    public static List<Npy> npz(String file, String prefix) throws IOException {
        return npz(dir(), file, prefix);
    }

    /** {@link #npz(String, String)} of a .npz in {@code zoo} (another zoo than mote.zoo). */
    static List<Npy> npz(Path zoo, String file, String prefix) throws IOException {
        TreeMap<Integer, Npy> byIndex = new TreeMap<>();
        try (ZipFile z = new ZipFile(zoo.resolve(file).toFile())) {
            Enumeration<? extends ZipEntry> e = z.entries();
            while (e.hasMoreElements()) {
                ZipEntry entry = e.nextElement();
                String name = entry.getName().replace(".npy", "");
                if (!name.startsWith(prefix)) {
                    continue;
                }
                try (InputStream in = z.getInputStream(entry)) {
                    byIndex.put(Integer.parseInt(name.substring(prefix.length())), npy(readAll(in)));
                }
            }
        }
        return new ArrayList<>(byIndex.values());
    }

    private static byte[] readAll(InputStream in) throws IOException {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        byte[] buf = new byte[8192];
        int n;
        while ((n = in.read(buf)) > 0) {
            out.write(buf, 0, n);
        }
        return out.toByteArray();
    }

    /** Parses a .npy file (versions 1 to 3, C order, little-endian). */
    static Npy npy(byte[] b) {
        if (b.length < 10 || (b[0] & 0xff) != 0x93 || b[1] != 'N') {
            throw new IllegalArgumentException("not a .npy file");
        }
        ByteBuffer bb = ByteBuffer.wrap(b).order(ByteOrder.LITTLE_ENDIAN);
        int major = b[6];
        int headerLen;
        int start;
        if (major == 1) {
            headerLen = bb.getShort(8) & 0xffff;
            start = 10;
        } else {
            headerLen = bb.getInt(8);
            start = 12;
        }
        String header = new String(b, start, headerLen, StandardCharsets.ISO_8859_1);
        Matcher d = Pattern.compile("'descr':\\s*'([^']*)'").matcher(header);
        Matcher s = Pattern.compile("'shape':\\s*\\(([^)]*)\\)").matcher(header);
        if (!d.find() || !s.find() || header.contains("'fortran_order': True")) {
            throw new IllegalArgumentException("unsupported .npy header " + header);
        }
        Npy n = new Npy();
        n.dtype = dtypeOf(d.group(1));
        List<Long> dims = new ArrayList<>();
        for (String x : s.group(1).split(",")) {
            if (!x.trim().isEmpty()) {
                dims.add(Long.parseLong(x.trim()));
            }
        }
        n.shape = dims.stream().mapToLong(Long::longValue).toArray();
        n.data = Arrays.copyOfRange(b, start + headerLen, b.length);
        return n;
    }

    private static String dtypeOf(String descr) {
        switch (descr) {
            case "<f4": return "float32";
            case "<f8": return "float64";
            case "<f2": return "float16";
            case "<i4": return "int32";
            case "<i8": return "int64";
            case "<i2": return "int16";
            case "|i1": return "int8";
            case "|u1": return "uint8";
            case "|b1": return "bool";
            default: throw new IllegalArgumentException("unsupported dtype " + descr);
        }
    }

    /** Elements as doubles, for comparison. */
    public static double[] values(String dtype, byte[] data) {
        ByteBuffer b = ByteBuffer.wrap(data).order(ByteOrder.LITTLE_ENDIAN);
        int size;
        switch (dtype) {
            case "float32": case "int32": size = 4; break;
            case "float64": case "int64": size = 8; break;
            case "float16": case "int16": size = 2; break;
            default: size = 1;
        }
        double[] out = new double[data.length / size];
        for (int i = 0; i < out.length; i++) {
            switch (dtype) {
                case "float32": out[i] = b.getFloat(i * 4); break;
                case "float64": out[i] = b.getDouble(i * 8); break;
                case "int32": out[i] = b.getInt(i * 4); break;
                case "int64": out[i] = b.getLong(i * 8); break;
                case "int16": out[i] = b.getShort(i * 2); break;
                case "float16": out[i] = half(b.getShort(i * 2)); break;
                case "uint8": case "bool": out[i] = b.get(i) & 0xff; break;
                default: out[i] = b.get(i);
            }
        }
        return out;
    }

    /** Floats widened to doubles, for {@link #assertClose(String, double[], double[], double, double)}. */
    public static double[] doubles(float[] f) {
        double[] d = new double[f.length];
        for (int i = 0; i < f.length; i++) {
            d[i] = f[i];
        }
        return d;
    }

    static double half(short h) {
        int bits = h & 0xffff;
        int sign = (bits >> 15) != 0 ? -1 : 1;
        int exp = (bits >> 10) & 0x1f;
        int frac = bits & 0x3ff;
        if (exp == 0) {
            return sign * Math.pow(2, -14) * (frac / 1024.0);
        }
        if (exp == 31) {
            return frac == 0 ? sign * Double.POSITIVE_INFINITY : Double.NaN;
        }
        return sign * Math.pow(2, exp - 15) * (1 + frac / 1024.0);
    }

    /** Asserts a tensor matches TVM's array within the tolerances (and has its shape, dtype). */
    static void assertClose(String what, Tensor got, Npy want, double rtol, double atol) {
        assertEquals(want.dtype, got.dtype(), what + ": dtype");
        assertEquals(Arrays.toString(want.shape), Arrays.toString(got.shape()), what + ": shape");
        assertClose(what, Zoo.values(got.dtype(), got.toRawBytes()), Zoo.values(want.dtype, want.data), rtol, atol);
    }

    public static void assertClose(String what, double[] g, double[] w, double rtol, double atol) {
        assertEquals(w.length, g.length, what + ": element count");
        for (int i = 0; i < w.length; i++) {
            if (!(Math.abs(g[i] - w[i]) <= atol + rtol * Math.abs(w[i]))) {
                fail(what + ": element " + i + " is " + g[i] + ", TVM says " + w[i]);
            }
        }
    }

    /** The zoo's mote.zoo.scale_shift in Java: dst[i] = 2 * src[i] + 1 on float32 pointers. */
    static Object scaleShift(Object... args) {
        Pointer src = (Pointer) args[0];
        Pointer dst = (Pointer) args[1];
        int n = (int) (long) (Long) args[2];
        java.nio.FloatBuffer s = src.asByteBuffer(4L * n).asFloatBuffer();
        java.nio.FloatBuffer d = dst.asByteBuffer(4L * n).asFloatBuffer();
        for (int i = 0; i < n; i++) {
            d.put(i, 2 * s.get(i) + 1);
        }
        return null;
    }

    static void registerScaleShift() {
        Function.register("mote.zoo.scale_shift", Zoo::scaleShift);
    }
}
