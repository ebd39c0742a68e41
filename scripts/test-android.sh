#!/usr/bin/env bash
# The Android artifacts, checked without any Android device or SDK (nothing here can load or
# run an Android binary):
#
#   scripts/test-android.sh
#
# 1. scripts/build-android-so.sh for arm64-v8a and x86_64: the JNI libraries, in the trixie
#    chroot (their import lists must match bindings-java/android/stubs/ and stubs/x86_64/).
# 2. scripts/audit-android-so.sh on each (each of its checks counts here).
# 3. scripts/test-android-unwind.sh: the unwinder those libraries carry unwinds Rust panics
#    (its checks count here).
# 4. scripts/build-aar.sh: the AAR and POM in target/android-repo.
# 5. The AAR: its entries (unzip -l), the libraries inside are the audited ones, classes.jar
#    holds a Java 11 class for every source file, the manifest's package and minSdk, the
#    shrinker rules name classes and members that exist with those signatures, the POM's
#    coordinates, the checksums, and Maven resolves org.mote:mote-android:0.1.0:aar from the
#    folder.
# Whether a phone would resolve models' symbols against these libraries is
# scripts/test-android-bionic.sh.
# Prints "android checks: N passed, M failed"; exits non-zero if any failed.
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
ROOT=$(cd "$HERE/.." && pwd -P)
cd "$ROOT"
export MOTE_CACHE="${MOTE_CACHE:-$HOME/.cache/mote}"

MIN_SDK=24
# shellcheck source=lib/checks.sh
. "$HERE/lib/checks.sh"
ok() { if "$@" >/dev/null 2>&1; then echo 0; else echo 1; fi; }
finish() {
  checks_summary android
  exit
}

start=$(date +%s)
# sum_suite OUTPUT LABEL: add a sub-suite's "LABEL checks: N passed, M failed" to the totals.
sum_suite() {
  local p f
  p=$(sed -n "s/^$2 checks: \([0-9]*\) passed, \([0-9]*\) failed$/\1/p" <<<"$1")
  f=$(sed -n "s/^$2 checks: \([0-9]*\) passed, \([0-9]*\) failed$/\2/p" <<<"$1")
  if [ -z "$p" ] || [ -z "$f" ]; then
    check "$2 printed its summary" 1
  else
    passed=$((passed + p)); failed=$((failed + f))
  fi
}
declare -A libs
for abi in arm64-v8a x86_64; do
  t=$(date +%s)
  lib=$("$HERE/build-android-so.sh" "$abi" | tail -n 1)
  if [ -z "$lib" ] || [ ! -f "$lib" ]; then
    check "$abi library built (scripts/build-android-so.sh $abi)" 1
    finish
  fi
  libs[$abi]=$lib
  check "$abi library built (scripts/build-android-so.sh $abi)" 0 "$lib, $(( $(date +%s) - t )) s"
  audit=$("$HERE/audit-android-so.sh" --abi "$abi" "$lib")
  echo "$audit"
  sum_suite "$audit" "android so"
done
lib=${libs[arm64-v8a]}

unwind=$("$HERE/test-android-unwind.sh")
echo "$unwind"
sum_suite "$unwind" "android unwind"

repo=$("$HERE/build-aar.sh" "${libs[arm64-v8a]}" "${libs[x86_64]}" | tail -n 1)
dir="$repo/org/mote/mote-android/0.1.0"
aar="$dir/mote-android-0.1.0.aar"
pom="$dir/mote-android-0.1.0.pom"
if [ ! -f "$aar" ]; then
  check "AAR written (scripts/build-aar.sh)" 1 "no $aar"
  finish
fi
check "AAR written (scripts/build-aar.sh)" 0 "$aar"

# Entries, by unzip -l (python's zipfile where unzip is missing: both read the central directory).
if command -v unzip >/dev/null; then
  entries=$(unzip -Z1 "$aar" | grep -v '/$' | sort)
  unzip -l "$aar"
else
  entries=$(python3 -c 'import sys, zipfile; [print(n) for n in zipfile.ZipFile(sys.argv[1]).namelist() if not n.endswith("/")]' "$aar" | sort)
fi
want=$(printf '%s\n' AndroidManifest.xml R.txt classes.jar jni/arm64-v8a/libmote_java.so jni/x86_64/libmote_java.so proguard.txt | sort)
check "AAR entries are exactly those of an AAR with two ABIs" "$(ok test "$entries" = "$want")" "$(tr '\n' ' ' <<<"$entries")"

x="$ROOT/target/aar-check"
rm -rf "$x"; mkdir -p "$x"
python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' "$aar" "$x/aar"
check "jni/arm64-v8a/libmote_java.so is the audited library" "$(ok cmp "${libs[arm64-v8a]}" "$x/aar/jni/arm64-v8a/libmote_java.so")"
check "jni/x86_64/libmote_java.so is the audited library" "$(ok cmp "${libs[x86_64]}" "$x/aar/jni/x86_64/libmote_java.so")"
check "R.txt is empty (no resources)" "$(ok test -f "$x/aar/R.txt" -a ! -s "$x/aar/R.txt")"

man="$x/aar/AndroidManifest.xml"
check "manifest: package org.mote" "$(ok grep -q 'package="org.mote"' "$man")"
check "manifest: minSdkVersion $MIN_SDK" "$(ok grep -q "android:minSdkVersion=\"$MIN_SDK\"" "$man")"

mkdir -p "$x/classes"
(cd "$x/classes" && jar --extract --file "$x/aar/classes.jar")
missing=""
for src in bindings-java/java/src/main/java/org/mote/*.java bindings-java/java/src/main/java/org/mote/rpc/*.java; do
  c=${src#bindings-java/java/src/main/java/}
  c=${c%.java}
  [ -f "$x/classes/$c.class" ] || missing="$missing $c"
done
check "classes.jar has a class for every source file" "$(ok test -z "$missing")" \
  "$(find "$x/classes" -name '*.class' | wc -l) classes${missing:+; missing:$missing}"
major=$(od -An -j6 -N2 -tu1 "$x/classes/org/mote/NativeBridge.class" 2>/dev/null | awk '{ print $1 * 256 + $2 }')
check "classes are Java 11 class files (major 55)" "$(ok test "${major:-0}" = 55)" "major ${major:-none}"

# The shrinker rules against the classes: each kept member exists with the kept signature.
jp() { javap -p -cp "$x/classes" "$@" 2>/dev/null; }
check "proguard: NativeBridge has native methods to keep" \
  "$(ok test "$(jp org.mote.NativeBridge | grep -c ' native ')" -gt 0)" "$(jp org.mote.NativeBridge | grep -c ' native ') natives"
check "proguard: RpcBridge has native methods to keep" \
  "$(ok test "$(jp org.mote.rpc.RpcBridge | grep -c ' native ')" -gt 0)" "$(jp org.mote.rpc.RpcBridge | grep -c ' native ') natives"
check "proguard: Function.dispatch(long, int[], long[], double[], String[]) exists" \
  "$(ok grep -q 'static long dispatch(long, int\[\], long\[\], double\[\], java.lang.String\[\])' <<<"$(jp org.mote.Function)")"
check "proguard: Logging.emit(int, String, String) exists" \
  "$(ok grep -q 'static void emit(int, java.lang.String, java.lang.String)' <<<"$(jp org.mote.Logging)")"
nocons=""; nexc=0
for c in "$x"/classes/org/mote/*Exception.class; do
  n=org.mote.$(basename "$c" .class)
  [ "$n" = org.mote.MoteException ] && continue
  jp "$n" | grep -q 'extends org.mote.MoteException' || continue
  nexc=$((nexc + 1))
  jp "$n" | grep -qF "$n(java.lang.String)" || nocons="$nocons $n"
done
check "proguard: every MoteException subclass has the (String) constructor JNI throws with" \
  "$(ok test "$nexc" = 20 -a -z "$nocons")" "$nexc subclasses${nocons:+; without:$nocons}"
for k in NativeBridge rpc.RpcBridge Function Logging MoteException; do
  grep -q "class org.mote.$k\b" "$x/aar/proguard.txt" || nocons="$nocons rule:$k"
done
check "proguard: rules for NativeBridge, RpcBridge, Function, Logging and the exceptions" "$(ok test -z "$nocons")"

check "POM: org.mote:mote-android:0.1.0, packaging aar" "$(ok python3 - "$pom" <<'PY'
import sys, xml.etree.ElementTree as ET
ns = {"m": "http://maven.apache.org/POM/4.0.0"}
r = ET.parse(sys.argv[1]).getroot()
got = [r.findtext("m:" + k, namespaces=ns) for k in ("groupId", "artifactId", "version", "packaging")]
sys.exit(0 if got == ["org.mote", "mote-android", "0.1.0", "aar"] else 1)
PY
)"
bad=""
for f in "$aar" "$pom"; do
  [ "$(sha1sum "$f" | cut -d' ' -f1)" = "$(cat "$f.sha1")" ] || bad="$bad $(basename "$f")"
done
check "checksums match" "$(ok test -z "$bad")" "$bad"

# A consumer's view: Maven resolves the coordinate from the folder as a repository. The
# artifact's copy in the local repository is removed before and after, so an earlier copy
# cannot answer (the local repository is $MOTE_CACHE/m2, for the plugin).
if command -v mvn >/dev/null; then
  rm -rf "$MOTE_CACHE/m2/org/mote/mote-android"
  if mvn -B -q -Dmaven.repo.local="$MOTE_CACHE/m2" \
      org.apache.maven.plugins:maven-dependency-plugin:3.8.1:get \
      -Dartifact=org.mote:mote-android:0.1.0:aar -Dtransitive=false \
      -DremoteRepositories="mote-local::default::file://$repo" >"$x/mvn.log" 2>&1 \
     && cmp -s "$aar" "$MOTE_CACHE/m2/org/mote/mote-android/0.1.0/mote-android-0.1.0.aar"; then
    check "Maven resolves org.mote:mote-android:0.1.0:aar from the folder" 0
  else
    tail -n 20 "$x/mvn.log"
    check "Maven resolves org.mote:mote-android:0.1.0:aar from the folder" 1 "see $x/mvn.log"
  fi
  rm -rf "$MOTE_CACHE/m2/org/mote/mote-android"
else
  check "Maven resolves org.mote:mote-android:0.1.0:aar from the folder" 1 "mvn is not installed (apt-get install maven)"
fi

echo "test-android: $(( $(date +%s) - start )) s" >&2
finish
