#!/usr/bin/env bash
# The RPC app (android-app/) under Robolectric on the desktop JVM, with the host (x86_64) build
# of libmote_java: the Activity, the foreground service, its wake lock and its watchdog, and
# TVM's unchanged Python client uploading, running and timing the zoo's mlp.so through the
# app's server; on API 35 (RpcAppTest) and on API 24, the app's minSdk (RpcAppApi24Test).
#
#   scripts/test-android-app.sh     (MOTE_ZOO_DIR: the x86_64 zoo, MOTE_PYTHON: the TVM 0.27
#                                    venv's python; both required)
#
# Steps:
#   0. The test dependencies' versions in android-app/build.gradle (testImplementation, for
#      Gradle, not run here) are those of android-app/test/pom.xml and of the monitor AAR
#      below, which is the version Robolectric's pom names; otherwise the script stops.
#   1. cargo build -p mote-java --features rpc (the host JNI library with the RPC server the
#      app runs, passed as -Dmote.library).
#   2. Once, with the network: Maven copies the frameworks Robolectric's sandboxes run,
#      org.robolectric:android-all-instrumented 15-robolectric-13954326-i7 (API 35) and
#      7.0.0_r1-robolectric-r1-i7 (API 24), into $MOTE_CACHE/robolectric-i7, and fetches
#      androidx.test:monitor (an AAR, as Robolectric's dependency); its classes.jar is unzipped
#      into target/android-app-test. Later runs pass -o to Maven: nothing is downloaded.
#   3. aapt2 compiles and links the app's resources against Debian's framework-res.apk (with
#      android-app/tools/aapt2_link.py, as scripts/build-apk.sh does): R.java for the
#      compiler, the resource APK and the manifest for Robolectric
#      (com/android/tools/test_config.properties).
#   4. mvn test in android-app/test (surefire pinned, a JVM per test class;
#      robolectric.offline=true).
#
# Prints "android app checks: N passed, M failed" from surefire's reports (N > 0 required);
# exits non-zero on any failure.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
ROOT=$(cd "$HERE/.." && pwd -P)
cd "$ROOT"
export MOTE_CACHE="${MOTE_CACHE:-$HOME/.cache/mote}"
M2="$MOTE_CACHE/m2"
OUT="$ROOT/target/android-app-test"
PACKAGE=org.mote.rpcapp
MIN_SDK=24
TARGET_SDK=35
# The frameworks of the SDKs the tests run (@Config(sdk = 35) and @Config(sdk = 24)).
INSTRUMENTED_VERSIONS="15-robolectric-13954326-i7 7.0.0_r1-robolectric-r1-i7"
ROBO_DIR="$MOTE_CACHE/robolectric-i7"
MONITOR_VERSION=1.8.0
MONITOR_AAR="$M2/androidx/test/monitor/$MONITOR_VERSION/monitor-$MONITOR_VERSION.aar"
DEPENDENCY_PLUGIN=org.apache.maven.plugins:maven-dependency-plugin:3.8.1
FRAMEWORK_RES=/usr/share/android-framework-res/framework-res.apk

log() { echo "test-android-app: $*" >&2; }
die() { log "$*"; echo "android app checks: 0 passed, 1 failed"; exit 1; }

for t in mvn javac cargo unzip aapt2 python3; do
    command -v "$t" >/dev/null || die "$t is not installed (aapt2: apt-get install aapt; see scripts/build-apk.sh)"
done
[ -f "$FRAMEWORK_RES" ] || die "$FRAMEWORK_RES not found (apt-get install android-framework-res)"
[ -n "${MOTE_ZOO_DIR:-}" ] || die "MOTE_ZOO_DIR is not set: set it to the x86_64 zoo (scripts/zoo.sh | tail -1)"
[ -f "$MOTE_ZOO_DIR/mlp.so" ] || die "MOTE_ZOO_DIR=$MOTE_ZOO_DIR has no mlp.so (run scripts/zoo.sh)"
[ -n "${MOTE_PYTHON:-}" ] || die "MOTE_PYTHON is not set: set it to the TVM 0.27 venv's python (scripts/venv.sh | tail -1)/bin/python"
[ -x "$MOTE_PYTHON" ] || die "MOTE_PYTHON=$MOTE_PYTHON is not an executable"

# --- build.gradle's test dependencies = pom.xml's (+ the monitor AAR) --------------------------
versions=$(python3 - android-app/build.gradle android-app/test/pom.xml "androidx.test:monitor:$MONITOR_VERSION" <<'PY'
import re, sys, xml.etree.ElementTree as ET
gradle_file, pom_file, monitor = sys.argv[1:4]
gradle = dict(m.rsplit(":", 1) for m in
              re.findall(r'^\s*testImplementation\s+["\']([^"\']+)["\']', open(gradle_file).read(), re.M))
ns = {"m": "http://maven.apache.org/POM/4.0.0"}
want = {}
for d in ET.parse(pom_file).getroot().findall("m:dependencies/m:dependency", ns):
    if d.findtext("m:scope", "", ns) == "test":
        want[d.findtext("m:groupId", "", ns) + ":" + d.findtext("m:artifactId", "", ns)] = \
            d.findtext("m:version", "", ns)
ga, v = monitor.rsplit(":", 1)
want[ga] = v
if not want or gradle != want:
    print("build.gradle testImplementation %s, but test/pom.xml and the script use %s"
          % (sorted(gradle.items()), sorted(want.items())))
    sys.exit(1)
print(" ".join(sorted(k + ":" + v for k, v in want.items())))
PY
) || die "test dependencies differ: $versions"
log "test dependencies (build.gradle = test/pom.xml): $versions"

log "building libmote_java (host, with the RPC server: the rpc feature)"
cargo build -q --locked -p mote-java --features rpc || die "cargo build -p mote-java --features rpc failed"
lib="$ROOT/target/debug/libmote_java.so"
[ -f "$lib" ] || die "no $lib"

# --- Maven: the first run fetches, later runs are offline ---------------------------------
cd "$ROOT/android-app/test"
offline=(-o)
if [ ! -d "$M2/org/robolectric/robolectric/4.17" ] || [ ! -f "$MONITOR_AAR" ] \
    || [ ! -d "$M2/org/apache/maven/surefire/surefire-junit4/3.5.2" ]; then
    # The first run: mvn test below fetches Robolectric, its dependencies and surefire's
    # JUnit 4 provider (about 400 MB with the copy below).
    offline=()
    log "Maven runs online this time, to fetch Robolectric into $M2"
fi
for v in $INSTRUMENTED_VERSIONS; do
    jar="$ROBO_DIR/android-all-instrumented-$v.jar"
    if [ ! -s "$jar" ]; then
        log "copying android-all-instrumented:$v into $ROBO_DIR (once, 100 to 200 MB)"
        mvn -B -q -Dstyle.color=never -Dmaven.repo.local="$M2" "$DEPENDENCY_PLUGIN:copy" \
            -Dartifact="org.robolectric:android-all-instrumented:$v" \
            -DoutputDirectory="$ROBO_DIR" >&2 \
            || die "mvn could not copy org.robolectric:android-all-instrumented:$v"
    fi
    [ -s "$jar" ] || die "$jar missing"
done
cd "$ROOT"
# Robolectric's pom names the monitor version the script fetches (checked once it is there).
robo_pom="$M2/org/robolectric/robolectric/4.17/robolectric-4.17.pom"
if [ -f "$robo_pom" ]; then
    grep -A1 '<artifactId>monitor</artifactId>' "$robo_pom" | grep -q "<version>$MONITOR_VERSION</version>" \
        || die "Robolectric 4.17's pom names another androidx.test:monitor than $MONITOR_VERSION"
fi

rm -rf "$OUT"
mkdir -p "$OUT/gen" "$OUT/res" "$OUT/monitor" "$OUT/config/com/android/tools"
if [ ! -f "$MONITOR_AAR" ]; then
    mvn -B -q -Dstyle.color=never -Dmaven.repo.local="$M2" "$DEPENDENCY_PLUGIN:get" \
        -Dartifact="androidx.test:monitor:$MONITOR_VERSION:aar" -Dtransitive=false >&2 \
        || die "mvn could not fetch androidx.test:monitor:$MONITOR_VERSION:aar"
fi
unzip -q -o "$MONITOR_AAR" classes.jar -d "$OUT/monitor" || die "cannot unzip classes.jar from $MONITOR_AAR"

# --- resources: R.java, the resource APK and the manifest ----------------------------------
# The manifest as build-apk.sh links it (package added), plus the SDK levels aapt2 is given
# there, written as text for Robolectric (which reads the text: specialUse and the API 31
# elements stay as written).
sed -e "0,/<manifest /s//<manifest package=\"$PACKAGE\" /" \
    -e "0,/<application/s//<uses-sdk android:minSdkVersion=\"$MIN_SDK\" android:targetSdkVersion=\"$TARGET_SDK\" \/>\n    <application/" \
    android-app/src/main/AndroidManifest.xml >"$OUT/AndroidManifest.xml"
grep -q "package=\"$PACKAGE\"" "$OUT/AndroidManifest.xml" || die "cannot set the package in the manifest"
grep -q "targetSdkVersion=\"$TARGET_SDK\"" "$OUT/AndroidManifest.xml" || die "cannot set the SDK levels in the manifest"
aapt2 compile --dir android-app/src/main/res -o "$OUT/res/res.zip" || die "aapt2 compile failed"
python3 android-app/tools/aapt2_link.py --framework "$FRAMEWORK_RES" \
    --manifest android-app/src/main/AndroidManifest.xml --package "$PACKAGE" \
    --min-sdk "$MIN_SDK" --target-sdk "$TARGET_SDK" --java "$OUT/gen" \
    --prepared "$OUT/AndroidManifest-aapt2.xml" -o "$OUT/resources.apk" "$OUT/res/res.zip" \
    || die "aapt2 link failed"
cat >"$OUT/config/com/android/tools/test_config.properties" <<EOF
android_merged_manifest=$OUT/AndroidManifest.xml
android_resource_apk=$OUT/resources.apk
android_custom_package=$PACKAGE
EOF

# --- the tests ---------------------------------------------------------------------------------
reports="$ROOT/android-app/test/target/surefire-reports"
rm -rf "$reports"
status=0
(cd android-app/test && mvn -B -Dstyle.color=never "${offline[@]}" -Dmaven.repo.local="$M2" \
    -Dmote.gen="$OUT/gen" -Dmote.library="$lib" -Dmote.zoo="$MOTE_ZOO_DIR" \
    -Dmote.python="$MOTE_PYTHON" -Drobolectric.dir="$ROBO_DIR" \
    -Dmonitor.jar="$OUT/monitor/classes.jar" -Drobolectric.config.dir="$OUT/config" test) \
    >"$OUT/mvn.log" 2>&1 || status=$?
grep -E 'Tests run|FAIL|ERROR|app-test:' "$OUT/mvn.log" | sed 's/\x1b\[[0-9;]*m//g' >&2 || true
[ "$status" -eq 0 ] || log "mvn test failed (exit $status); the whole log: $OUT/mvn.log"

# shellcheck source=scripts/lib/surefire-summary.sh
. "$ROOT/scripts/lib/surefire-summary.sh"
surefire_summary "android app" "$reports" "$status" "$MOTE_PYTHON"
