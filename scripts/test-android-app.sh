#!/usr/bin/env bash
# The RPC app (android-app/) under Robolectric on the desktop JVM, with the host (x86_64) build
# of libmote_java: the Activity, the foreground service and its watchdog, and TVM's unchanged
# Python client uploading, running and timing the zoo's mlp.so through the app's server.
#
#   scripts/test-android-app.sh     (MOTE_ZOO_DIR: the x86_64 zoo, MOTE_PYTHON: the TVM 0.27
#                                    venv's python; both required)
#
# Steps:
#   1. cargo build -p mote-java (the host JNI library, passed as -Dmote.library).
#   2. Once, with the network: Maven copies
#      org.robolectric:android-all-instrumented:15-robolectric-13954326-i7 (the framework
#      Robolectric's sandbox runs) into $MOTE_CACHE/robolectric-15-i7, and fetches
#      androidx.test:monitor (an AAR, as Robolectric's dependency); its classes.jar is unzipped
#      into target/android-app-test. Later runs pass -o to Maven: nothing is downloaded.
#   3. aapt2 compiles and links the app's resources against Debian's framework-res.apk (as
#      scripts/build-apk.sh does): R.java for the compiler, the resource APK and the manifest
#      for Robolectric (com/android/tools/test_config.properties).
#   4. mvn test in android-app/test (surefire pinned; robolectric.offline=true).
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
INSTRUMENTED=org.robolectric:android-all-instrumented:15-robolectric-13954326-i7
ROBO_DIR="$MOTE_CACHE/robolectric-15-i7"
ROBO_JAR="$ROBO_DIR/android-all-instrumented-15-robolectric-13954326-i7.jar"
MONITOR_AAR="$M2/androidx/test/monitor/1.8.0/monitor-1.8.0.aar"
DEPENDENCY_PLUGIN=org.apache.maven.plugins:maven-dependency-plugin:3.8.1
FRAMEWORK_RES=/usr/share/android-framework-res/framework-res.apk

log() { echo "test-android-app: $*" >&2; }
die() { log "$*"; echo "android app checks: 0 passed, 1 failed"; exit 1; }

for t in mvn javac cargo unzip aapt2; do
    command -v "$t" >/dev/null || die "$t is not installed (aapt2: apt-get install aapt; see scripts/build-apk.sh)"
done
[ -f "$FRAMEWORK_RES" ] || die "$FRAMEWORK_RES not found (apt-get install android-framework-res)"
[ -n "${MOTE_ZOO_DIR:-}" ] || die "MOTE_ZOO_DIR is not set: set it to the x86_64 zoo (scripts/zoo.sh | tail -1)"
[ -f "$MOTE_ZOO_DIR/mlp.so" ] || die "MOTE_ZOO_DIR=$MOTE_ZOO_DIR has no mlp.so (run scripts/zoo.sh)"
[ -n "${MOTE_PYTHON:-}" ] || die "MOTE_PYTHON is not set: set it to the TVM 0.27 venv's python (scripts/venv.sh | tail -1)/bin/python"
[ -x "$MOTE_PYTHON" ] || die "MOTE_PYTHON=$MOTE_PYTHON is not an executable"

log "building libmote_java (host)"
cargo build -q --locked -p mote-java || die "cargo build -p mote-java failed"
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
if [ ! -s "$ROBO_JAR" ]; then
    log "copying $INSTRUMENTED into $ROBO_DIR (once, about 200 MB)"
    mvn -B -q -Dstyle.color=never -Dmaven.repo.local="$M2" "$DEPENDENCY_PLUGIN:copy" \
        -Dartifact="$INSTRUMENTED" -DoutputDirectory="$ROBO_DIR" >&2 \
        || die "mvn could not copy $INSTRUMENTED"
fi
[ -s "$ROBO_JAR" ] || die "$ROBO_JAR missing"
cd "$ROOT"

rm -rf "$OUT"
mkdir -p "$OUT/gen" "$OUT/res" "$OUT/monitor" "$OUT/config/com/android/tools"
if [ ! -f "$MONITOR_AAR" ]; then
    mvn -B -q -Dstyle.color=never -Dmaven.repo.local="$M2" "$DEPENDENCY_PLUGIN:get" \
        -Dartifact=androidx.test:monitor:1.8.0:aar -Dtransitive=false >&2 \
        || die "mvn could not fetch androidx.test:monitor:1.8.0:aar"
fi
unzip -q -o "$MONITOR_AAR" classes.jar -d "$OUT/monitor" || die "cannot unzip classes.jar from $MONITOR_AAR"

# --- resources: R.java, the resource APK and the manifest ----------------------------------
# The manifest as build-apk.sh links it (package added), plus the SDK levels aapt2 is given
# there, written as text for Robolectric.
sed -e "0,/<manifest /s//<manifest package=\"$PACKAGE\" /" \
    -e "0,/<application/s//<uses-sdk android:minSdkVersion=\"33\" android:targetSdkVersion=\"35\" \/>\n    <application/" \
    android-app/src/main/AndroidManifest.xml >"$OUT/AndroidManifest.xml"
grep -q "package=\"$PACKAGE\"" "$OUT/AndroidManifest.xml" || die "cannot set the package in the manifest"
grep -q 'targetSdkVersion="35"' "$OUT/AndroidManifest.xml" || die "cannot set the SDK levels in the manifest"
aapt2 compile --dir android-app/src/main/res -o "$OUT/res/res.zip" || die "aapt2 compile failed"
aapt2 link -I "$FRAMEWORK_RES" --manifest "$OUT/AndroidManifest.xml" --java "$OUT/gen" \
    -o "$OUT/resources.apk" "$OUT/res/res.zip" || die "aapt2 link failed"
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
