import java.io.File;
import java.io.FileInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.codehaus.mojo.animal_sniffer.Clazz;
import org.codehaus.mojo.animal_sniffer.SignatureChecker;
import org.codehaus.mojo.animal_sniffer.logging.Logger;
import org.objectweb.asm.ClassReader;
import org.objectweb.asm.ClassVisitor;
import org.objectweb.asm.FieldVisitor;
import org.objectweb.asm.MethodVisitor;
import org.objectweb.asm.Opcodes;

/**
 * Checks compiled classes against an Android API level's signature (animal-sniffer), for
 * scripts/build-apk.sh:
 *
 * <pre>
 *   java -cp animal-sniffer.jar:asm.jar ApiLevelCheck.java SIGNATURE BACKPORTS CLASSES SOURCES PREFIX... [-EXCLUDED_PREFIX...]
 * </pre>
 *
 * <p>SIGNATURE is e.g. net.sf.androidscents.signature:android-api-level-24 (the framework and
 * the java.* classes of that level). BACKPORTS is the output of d8's
 * {@code BackportedMethodList --min-api N}: methods d8 rewrites for that level (e.g.
 * {@code String.join}), added to the signature. Classes whose path (under CLASSES) starts with a
 * PREFIX, and with none of the -EXCLUDED ones, are checked (SOURCES, a path of source folders,
 * gives the findings their file names). Every class under CLASSES is added to the signature with
 * the members it declares (they are in the APK), so that a call through one of them still
 * reaches the framework class that declares the member: {@code startForegroundService} called
 * on an Activity subclass is checked as {@code Context.startForegroundService}.
 *
 * <p>Methods and classes annotated {@code android.annotation.TargetApi} are not checked: that
 * is where the app puts calls made only behind a {@code Build.VERSION.SDK_INT} test
 * (animal-sniffer cannot see the test; the review must). Nor are those annotated
 * {@code org.mote.rpc.Api26}, bindings-java's marker for its java.time and java.nio.file
 * overloads. The {@code invokedynamic}s javac writes for lambdas and string concatenation are
 * fine: d8 desugars them.
 *
 * <p>Prints each finding and a count; exits 1 when there is a finding.
 */
public final class ApiLevelCheck {
    public static void main(String[] args) throws IOException {
        if (args.length < 5) {
            System.err.println("usage: ApiLevelCheck SIGNATURE BACKPORTS CLASSES SOURCES PREFIX... [-EXCLUDED...]");
            System.exit(2);
        }
        Map<String, Clazz> api;
        try (InputStream in = new FileInputStream(args[0])) {
            api = new HashMap<>(SignatureChecker.loadClasses(in));
        }
        int backports = addBackports(api, Paths.get(args[1]));

        Path classes = Paths.get(args[2]);
        List<String> include = new ArrayList<>();
        List<String> exclude = new ArrayList<>();
        for (int i = 4; i < args.length; i++) {
            if (args[i].startsWith("-")) {
                exclude.add(args[i].substring(1));
            } else {
                include.add(args[i]);
            }
        }
        List<Path> all;
        try (Stream<Path> s = Files.walk(classes)) {
            all = s.filter(p -> p.toString().endsWith(".class")).sorted().collect(Collectors.toList());
        }
        List<Path> checked = new ArrayList<>();
        for (Path p : all) {
            addOwnClass(api, p);
            String rel = classes.relativize(p).toString().replace(File.separatorChar, '/');
            if (include.stream().anyMatch(rel::startsWith)
                    && exclude.stream().noneMatch(rel::startsWith)) {
                checked.add(p);
            }
        }
        if (checked.isEmpty()) {
            System.out.println("api check: no class matches " + include);
            System.exit(1);
        }

        List<String> findings = Collections.synchronizedList(new ArrayList<>());
        SignatureChecker checker = new SignatureChecker(api, Collections.emptySet(), new Logger() {
            @Override public void info(String m) {}
            @Override public void info(String m, Throwable t) {}
            @Override public void debug(String m) {}
            @Override public void debug(String m, Throwable t) {}
            @Override public void warn(String m) { findings.add(m); }
            @Override public void warn(String m, Throwable t) { findings.add(m); }
            @Override public void error(String m) { findings.add(m); }
            @Override public void error(String m, Throwable t) { findings.add(m); }
        });
        // org.mote.rpc.Api26: bindings-java's own marker for its Duration and Path overloads.
        checker.setAnnotationTypes(List.of("android.annotation.TargetApi", "org.mote.rpc.Api26"));
        List<File> sources = new ArrayList<>();
        for (String dir : args[3].split(File.pathSeparator)) {
            sources.add(new File(dir));
        }
        checker.setSourcePath(sources);
        for (Path p : checked) {
            checker.process(p.toFile());
        }
        for (String f : findings) {
            System.out.println(f);
        }
        System.out.println("api check: " + checked.size() + " classes, " + findings.size()
                + " findings (signature " + Paths.get(args[0]).getFileName() + ", "
                + backports + " d8 backports added)");
        System.exit(findings.isEmpty() && !checker.isSignatureBroken() ? 0 : 1);
    }

    /** Adds a class of the APK to the signature: its super types and the members it declares. */
    private static void addOwnClass(Map<String, Clazz> api, Path file) throws IOException {
        Set<String> sigs = new HashSet<>();
        String[] header = new String[1];
        String[] supers = new String[1];
        String[][] interfaces = new String[1][];
        new ClassReader(Files.readAllBytes(file)).accept(new ClassVisitor(Opcodes.ASM9) {
            @Override
            public void visit(int version, int access, String name, String signature,
                    String superName, String[] ifaces) {
                header[0] = name;
                supers[0] = superName;
                interfaces[0] = ifaces == null ? new String[0] : ifaces;
            }

            @Override
            public FieldVisitor visitField(int access, String name, String desc, String signature,
                    Object value) {
                sigs.add(name + "#" + desc);
                return null;
            }

            @Override
            public MethodVisitor visitMethod(int access, String name, String desc,
                    String signature, String[] exceptions) {
                sigs.add(name + desc);
                return null;
            }
        }, ClassReader.SKIP_CODE | ClassReader.SKIP_DEBUG | ClassReader.SKIP_FRAMES);
        api.put(header[0], new Clazz(header[0], sigs, supers[0], interfaces[0]));
    }

    /** Adds "owner#nameDescriptor" lines to the signature; returns how many were added. */
    private static int addBackports(Map<String, Clazz> api, Path list) throws IOException {
        int n = 0;
        for (String line : Files.readAllLines(list)) {
            int hash = line.indexOf('#');
            if (hash <= 0) {
                continue;
            }
            String owner = line.substring(0, hash);
            Clazz c = api.get(owner);
            Set<String> sigs = new HashSet<>();
            if (c != null) {
                sigs.addAll(c.getSignatures());
            }
            if (sigs.add(line.substring(hash + 1))) {
                n++;
            }
            api.put(owner, c != null
                    ? new Clazz(owner, sigs, c.getSuperClass(), c.getSuperInterfaces())
                    : new Clazz(owner, sigs, "java/lang/Object", new String[0]));
        }
        return n;
    }
}
