#!/usr/bin/env bash
# The Android artifacts, checked without any Android device or SDK (nothing here can load or
# run an Android binary):
#
#   scripts/test-android.sh
#
# 1. scripts/build-android-so.sh for arm64-v8a and x86_64, each twice: the inference library
#    (no RPC server) and with --rpc the one with Mote's RPC server, in the trixie chroot (their
#    import lists must match bindings-java/android/stubs/ and stubs/x86_64/: lib*.txt and
#    lib*-rpc.txt). The x86_64 inference library builds while the arm64 ones do.
# 2. scripts/audit-android-so.sh on each (--rpc for the second; each of its checks counts here):
#    among them, the inference library exports no Java_org_mote_rpc_* symbol and holds no
#    mote_rpc code, the rpc one has both.
# 3. scripts/test-android-unwind.sh: the unwinder those libraries carry unwinds Rust panics
#    (its checks count here).
# 4. scripts/build-aar.sh: the two AARs (org.mote:mote-android, the inference library, and
#    org.mote:mote-android-rpc) and their POMs in target/android-repo.
# 5. Each AAR: its entries (unzip -l), the libraries inside are the audited ones of its
#    variant (and, read again from the AAR, have or lack the RPC server), classes.jar holds a
#    Java 11 class for every source file of its packages and, in the inference AAR, no
#    org/mote/rpc/ entry, the manifest's package and minSdk, the shrinker rules name classes
#    and members that exist with those signatures (RpcBridge's only in the rpc AAR), the POM's
#    coordinates and a description naming the other artifact as the alternative, the
#    checksums, and Maven resolves the coordinate from the folder.
# Whether a phone would resolve models' symbols against these libraries is
# scripts/test-android-bionic.sh.
# Prints "android checks: N passed, M failed"; exits non-zero if any failed.
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
ROOT=$(cd "$HERE/.." && pwd -P)
cd "$ROOT"
export MOTE_CACHE="${MOTE_CACHE:-$HOME/.cache/mote}"

MIN_SDK=24
VERSION=0.1.0
SRC=bindings-java/java/src/main/java
# shellcheck source=lib/checks.sh
. "$HERE/lib/checks.sh"
ok() { if "$@" >/dev/null 2>&1; then echo 0; else echo 1; fi; }
bg_pid=""
finish() {
  [ -z "$bg_pid" ] || kill "$bg_pid" 2>/dev/null
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
# libs[ABI]: the inference library; libs[rpc/ABI]: the one with the RPC server.
# The x86_64 inference library builds in the background while the arm64 ones build (the ABIs
# have cargo folders of their own): one codegen unit per crate keeps one core busy, and this
# machine has two. Its output is printed when the loop reaches it.
bg_out=$(mktemp) bg_err=$(mktemp)
bg_start=$(date +%s)
"$HERE/build-android-so.sh" x86_64 >"$bg_out" 2>"$bg_err" &
bg_pid=$!
declare -A libs
for abi in arm64-v8a x86_64; do
  for variant in inference rpc; do
    flag=(); key=$abi; name="$abi library"
    if [ "$variant" = rpc ]; then flag=(--rpc); key=rpc/$abi; name="$abi library with the RPC server"; fi
    t=$(date +%s)
    if [ "$key" = x86_64 ]; then
      wait "$bg_pid"
      bg_pid=""
      cat "$bg_err" >&2
      lib=$(tail -n 1 "$bg_out")
      rm -f "$bg_out" "$bg_err"
      t=$bg_start
    else
      lib=$("$HERE/build-android-so.sh" "${flag[@]}" "$abi" | tail -n 1)
    fi
    if [ -z "$lib" ] || [ ! -f "$lib" ]; then
      check "$name built (scripts/build-android-so.sh ${flag[*]}${flag[*]:+ }$abi)" 1
      finish
    fi
    libs[$key]=$lib
    check "$name built (scripts/build-android-so.sh ${flag[*]}${flag[*]:+ }$abi)" 0 "$lib, $(( $(date +%s) - t )) s"
    audit=$("$HERE/audit-android-so.sh" --abi "$abi" "${flag[@]}" "$lib")
    echo "$audit"
    sum_suite "$audit" "android so"
  done
done

unwind=$("$HERE/test-android-unwind.sh")
echo "$unwind"
sum_suite "$unwind" "android unwind"

repo=$("$HERE/build-aar.sh" "${libs[arm64-v8a]}" "${libs[x86_64]}" "${libs[rpc/arm64-v8a]}" "${libs[rpc/x86_64]}" | tail -n 1)
if [ -z "$repo" ] || [ ! -d "$repo" ]; then
  check "AARs written (scripts/build-aar.sh)" 1 "no repository folder"
  finish
fi

RE=readelf
command -v "$RE" >/dev/null || RE=llvm-readelf
# rpc_exports LIB: its Java_org_mote_rpc_* dynamic exports; rpc_code LIB: the symbols of its
# symbol table naming mote_rpc (the crate's code; scripts/audit-android-so.sh explains).
rpc_exports() { "$RE" --dyn-syms -W "$1" | awk '$1 ~ /^[0-9]+:$/ && $7 != "UND" && $8 ~ /^Java_org_mote_rpc_/' | wc -l; }
rpc_code() { "$RE" -s -W "$1" | awk '/^Symbol table .*\.symtab/ { t = 1; next } /^Symbol table/ { t = 0 } t && $8 ~ /mote_rpc/' | wc -l; }

# check_aar ARTIFACT VARIANT OTHER: the checks of step 5 for one AAR (VARIANT inference or rpc;
# OTHER: the artifact it is an alternative to).
check_aar() {
  local artifact=$1 variant=$2 other=$3
  local dir="$repo/org/mote/$artifact/$VERSION"
  local aar="$dir/$artifact-$VERSION.aar" pom="$dir/$artifact-$VERSION.pom"
  local x="$ROOT/target/aar-check/$artifact" entries want abi key n m missing src c major nocons nexc k
  if [ ! -f "$aar" ]; then
    check "$artifact: AAR written (scripts/build-aar.sh)" 1 "no $aar"
    return
  fi
  check "$artifact: AAR written (scripts/build-aar.sh)" 0 "$aar"

  # Entries, by unzip -l (python's zipfile where unzip is missing: both read the central directory).
  if command -v unzip >/dev/null; then
    entries=$(unzip -Z1 "$aar" | grep -v '/$' | sort)
    unzip -l "$aar"
  else
    entries=$(python3 -c 'import sys, zipfile; [print(n) for n in zipfile.ZipFile(sys.argv[1]).namelist() if not n.endswith("/")]' "$aar" | sort)
  fi
  want=$(printf '%s\n' AndroidManifest.xml R.txt classes.jar jni/arm64-v8a/libmote_java.so jni/x86_64/libmote_java.so proguard.txt | sort)
  check "$artifact: AAR entries are exactly those of an AAR with two ABIs" "$(ok test "$entries" = "$want")" "$(tr '\n' ' ' <<<"$entries")"

  rm -rf "$x"; mkdir -p "$x"
  python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' "$aar" "$x/aar"
  for abi in arm64-v8a x86_64; do
    key=$abi; [ "$variant" = rpc ] && key=rpc/$abi
    check "$artifact: jni/$abi/libmote_java.so is the audited $variant library" "$(ok cmp "${libs[$key]}" "$x/aar/jni/$abi/libmote_java.so")"
    n=$(rpc_exports "$x/aar/jni/$abi/libmote_java.so")
    m=$(rpc_code "$x/aar/jni/$abi/libmote_java.so")
    if [ "$variant" = rpc ]; then
      check "$artifact: jni/$abi/libmote_java.so has the RPC server (Java_org_mote_rpc_* exports, mote_rpc code)" \
        "$(ok test "$n" -gt 0 -a "$m" -gt 0)" "$n exports, $m symbols"
    else
      check "$artifact: jni/$abi/libmote_java.so has no RPC server (no Java_org_mote_rpc_* export, no mote_rpc code)" \
        "$(ok test "$n" = 0 -a "$m" = 0)" "$n exports, $m symbols"
    fi
  done
  check "$artifact: R.txt is empty (no resources)" "$(ok test -f "$x/aar/R.txt" -a ! -s "$x/aar/R.txt")"

  local man="$x/aar/AndroidManifest.xml"
  check "$artifact: manifest: package org.mote" "$(ok grep -q 'package="org.mote"' "$man")"
  check "$artifact: manifest: minSdkVersion $MIN_SDK" "$(ok grep -q "android:minSdkVersion=\"$MIN_SDK\"" "$man")"

  mkdir -p "$x/classes"
  (cd "$x/classes" && jar --extract --file "$x/aar/classes.jar")
  local packages=("$SRC"/org/mote/*.java)
  [ "$variant" = rpc ] && packages+=("$SRC"/org/mote/rpc/*.java)
  missing=""
  for src in "${packages[@]}"; do
    c=${src#"$SRC"/}
    c=${c%.java}
    [ -f "$x/classes/$c.class" ] || missing="$missing $c"
  done
  check "$artifact: classes.jar has a class for every source file of org.mote$([ "$variant" = rpc ] && echo ' and org.mote.rpc')" \
    "$(ok test -z "$missing")" "$(find "$x/classes" -name '*.class' | wc -l) classes${missing:+; missing:$missing}"
  n=$(python3 -c 'import sys, zipfile; print(sum(n.startswith("org/mote/rpc/") for n in zipfile.ZipFile(sys.argv[1]).namelist()))' "$x/aar/classes.jar")
  if [ "$variant" = rpc ]; then
    check "$artifact: classes.jar has org/mote/rpc/ (the RPC server's classes)" "$(ok test "$n" -gt 0)" "$n entries"
  else
    check "$artifact: classes.jar has no org/mote/rpc/ entry" "$(ok test "$n" = 0)" "$n entries"
  fi
  major=$(od -An -j6 -N2 -tu1 "$x/classes/org/mote/NativeBridge.class" 2>/dev/null | awk '{ print $1 * 256 + $2 }')
  check "$artifact: classes are Java 11 class files (major 55)" "$(ok test "${major:-0}" = 55)" "major ${major:-none}"

  # The shrinker rules against the classes: each kept member exists with the kept signature.
  jp() { javap -p -cp "$x/classes" "$@" 2>/dev/null; }
  check "$artifact: proguard: NativeBridge has native methods to keep" \
    "$(ok test "$(jp org.mote.NativeBridge | grep -c ' native ')" -gt 0)" "$(jp org.mote.NativeBridge | grep -c ' native ') natives"
  if [ "$variant" = rpc ]; then
    check "$artifact: proguard: RpcBridge has native methods to keep" \
      "$(ok test "$(jp org.mote.rpc.RpcBridge | grep -c ' native ')" -gt 0)" "$(jp org.mote.rpc.RpcBridge | grep -c ' native ') natives"
  fi
  check "$artifact: proguard: Function.dispatch(long, int[], long[], double[], String[]) exists" \
    "$(ok grep -q 'static long dispatch(long, int\[\], long\[\], double\[\], java.lang.String\[\])' <<<"$(jp org.mote.Function)")"
  check "$artifact: proguard: Logging.emit(int, String, String) exists" \
    "$(ok grep -q 'static void emit(int, java.lang.String, java.lang.String)' <<<"$(jp org.mote.Logging)")"
  nocons=""; nexc=0
  for c in "$x"/classes/org/mote/*Exception.class; do
    n=org.mote.$(basename "$c" .class)
    [ "$n" = org.mote.MoteException ] && continue
    jp "$n" | grep -q 'extends org.mote.MoteException' || continue
    nexc=$((nexc + 1))
    jp "$n" | grep -qF "$n(java.lang.String)" || nocons="$nocons $n"
  done
  check "$artifact: proguard: every MoteException subclass has the (String) constructor JNI throws with" \
    "$(ok test "$nexc" = 20 -a -z "$nocons")" "$nexc subclasses${nocons:+; without:$nocons}"
  local rules="NativeBridge Function Logging MoteException"
  [ "$variant" = rpc ] && rules="$rules rpc.RpcBridge"
  for k in $rules; do
    grep -q "class org.mote.$k\b" "$x/aar/proguard.txt" || nocons="$nocons rule:$k"
  done
  if [ "$variant" = inference ]; then
    # No rule for a class the AAR does not have.
    grep -q 'org\.mote\.rpc\.' "$x/aar/proguard.txt" && nocons="$nocons rule-for-absent:org.mote.rpc"
  fi
  check "$artifact: proguard: rules for $(tr ' ' ',' <<<"$rules")$([ "$variant" = inference ] && echo ', none for org.mote.rpc')" \
    "$(ok test -z "$nocons")" "$nocons"

  check "$artifact: POM: org.mote:$artifact:$VERSION, packaging aar, described as the alternative to $other" "$(ok python3 - "$pom" "$artifact" "$VERSION" "$other" <<'PY'
import sys, xml.etree.ElementTree as ET
pom, artifact, version, other = sys.argv[1:5]
ns = {"m": "http://maven.apache.org/POM/4.0.0"}
r = ET.parse(pom).getroot()
got = [r.findtext("m:" + k, namespaces=ns) for k in ("groupId", "artifactId", "version", "packaging")]
desc = r.findtext("m:description", default="", namespaces=ns)
sys.exit(0 if got == ["org.mote", artifact, version, "aar"]
         and f"An alternative to org.mote:{other}" in desc and "never both" in desc else 1)
PY
)"
  local bad=""
  for f in "$aar" "$pom"; do
    [ "$(sha1sum "$f" | cut -d' ' -f1)" = "$(cat "$f.sha1")" ] || bad="$bad $(basename "$f")"
  done
  check "$artifact: checksums match" "$(ok test -z "$bad")" "$bad"

  # A consumer's view: Maven resolves the coordinate from the folder as a repository. The
  # artifact's copy in the local repository is removed before and after, so an earlier copy
  # cannot answer (the local repository is $MOTE_CACHE/m2, for the plugin).
  local coord="org.mote:$artifact:$VERSION:aar"
  if command -v mvn >/dev/null; then
    rm -rf "$MOTE_CACHE/m2/org/mote/$artifact"
    if mvn -B -q -Dmaven.repo.local="$MOTE_CACHE/m2" \
        org.apache.maven.plugins:maven-dependency-plugin:3.8.1:get \
        -Dartifact="$coord" -Dtransitive=false \
        -DremoteRepositories="mote-local::default::file://$repo" >"$x/mvn.log" 2>&1 \
       && cmp -s "$aar" "$MOTE_CACHE/m2/org/mote/$artifact/$VERSION/$artifact-$VERSION.aar"; then
      check "Maven resolves $coord from the folder" 0
    else
      tail -n 20 "$x/mvn.log"
      check "Maven resolves $coord from the folder" 1 "see $x/mvn.log"
    fi
    rm -rf "$MOTE_CACHE/m2/org/mote/$artifact"
  else
    check "Maven resolves $coord from the folder" 1 "mvn is not installed (apt-get install maven)"
  fi
}

check_aar mote-android inference mote-android-rpc
check_aar mote-android-rpc rpc mote-android

echo "test-android: $(( $(date +%s) - start )) s" >&2
finish
