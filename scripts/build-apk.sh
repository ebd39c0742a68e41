#!/usr/bin/env bash
# Build the Mote RPC app (android-app/) as a signed APK without the Android SDK or Gradle:
#
#   scripts/build-apk.sh [ARM64_LIB [X86_64_LIB]]   -> last stdout line: path of
#                                                      target/android-app/mote-rpc.apk
#
# ARM64_LIB and X86_64_LIB are the JNI libraries of the two ABIs, built with the RPC server
# (default: built by scripts/build-android-so.sh --rpc, the org.mote:mote-android-rpc variant;
# x86_64 is the emulator's). Steps (the
# recipe: ../shared/TOOLCHAINS.md section 3, in our words in android-app/README.md):
#   1. Maven fetches into $MOTE_CACHE/m2 (once; later runs do not call Maven):
#      org.robolectric:android-all:15-robolectric-13954326 (API 35 framework classes, the
#      compile class path) and com.android.tools:r8:9.5.28 (d8, the dexer).
#   2. aapt2 compile + link the manifest (plus the package attribute) and
#      android-app/src/main/res against Debian's
#      /usr/share/android-framework-res/framework-res.apk (API 29), min SDK 24, target 35;
#      `--java` writes R.java. android-app/tools/aapt2_link.py runs the link: it gets the
#      manifest's three post-API-29 items through that aapt2 (<uses-native-library>,
#      <property>, foregroundServiceType specialUse) and fails on anything else it rejects.
#   3. javac --release 11 of the app, R.java and bindings-java's org.mote + org.mote.rpc
#      sources (what org.mote:mote-android-rpc packs, plus org.mote.tvm4j) against android-all (a class path, not a boot class path: it has no java.lang),
#      all lints as errors but "classfile" (android-all's annotations name members that
#      javac cannot see).
#   4. The classes are checked against the API 24 signature (animal-sniffer, with what d8
#      backports for min-api 24 added; methods annotated @TargetApi, or bindings-java's @Api26,
#      are skipped: they are the ones behind a Build.VERSION.SDK_INT test), the app's and
#      bindings-java's apart; see android-app/tools/ApiLevelCheck.java.
#      d8 --min-api 24 -> classes.dex.
#   5. classes.dex is added (deflated), zipalign -p -f 4 aligns resources.arsc, then
#      lib/arm64-v8a/libmote_java.so and lib/x86_64/libmote_java.so are appended stored (the manifest says
#      extractNativeLibs="false": the phone maps it straight from the APK) with its data at a
#      multiple of 16 KB (the page size of some Android 15+ phones).
#   6. apksigner signs with a debug key kept outside target/, so that an APK built from any
#      clean checkout installs over an older one: $MOTE_ANDROID_KEYSTORE when set (an existing
#      keystore with the Android SDK's debug-key conventions: alias androiddebugkey, passwords
#      "android", e.g. ~/.android/debug.keystore), otherwise $MOTE_CACHE/android-debug.keystore,
#      which keytool generates once, when missing.
#   7. Checks, printed as "apk checks: N passed, M failed" (exit 1 when M > 0); one of them
#      builds the APK a second time from a copy of the sources in an empty folder (as from a
#      clean checkout: its own target/) and compares the two signing certificates.
#
# Debian packages aapt (aapt, aapt2), zipalign, apksigner and android-framework-res are
# installed with apt-get when missing and running as root; otherwise the script stops and says
# what to install. Nothing here installs or runs the APK on a device.
#
# Environment:
#   MOTE_CACHE             cache folder (default ~/.cache/mote); the Maven repository is
#                          $MOTE_CACHE/m2, the generated debug key android-debug.keystore
#   MOTE_ANDROID_KEYSTORE  sign with this keystore instead (must exist; see step 6)
#   MOTE_APK_CLEAN_CHECK=0 skip the second build of step 7 (the second build itself sets it)
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
ROOT=$(git -C "$HERE" rev-parse --show-toplevel 2>/dev/null || (cd "$HERE/.." && pwd -P))
cd "$ROOT"

MOTE_CACHE="${MOTE_CACHE:-$HOME/.cache/mote}"
M2="$MOTE_CACHE/m2"
APP="$ROOT/android-app"
OUT="$ROOT/target/android-app"
PACKAGE=org.mote.rpcapp
MIN_SDK=24
TARGET_SDK=35
ANDROID_ALL=org.robolectric:android-all:15-robolectric-13954326
R8=com.android.tools:r8:9.5.28
# The API level check (step 4): animal-sniffer and the API 24 signature of the androidscents
# project (android.jar 7.0_r2 as a signature), with the ASM that animal-sniffer 1.28 names.
SNIFFER=org.codehaus.mojo:animal-sniffer:1.28
ASM=org.ow2.asm:asm:9.10.1
SIGNATURE=net.sf.androidscents.signature:android-api-level-24:7.0_r2:signature
FRAMEWORK_RES=/usr/share/android-framework-res/framework-res.apk

log() { echo "build-apk: $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# --- tools -------------------------------------------------------------------------------
for t in javac java jar keytool mvn zip unzip python3 readelf; do
  command -v "$t" >/dev/null || die "$t is not installed (javac/java/jar/keytool: apt-get install openjdk-17-jdk-headless; mvn: maven; readelf: binutils; zip, unzip, python3)"
done
missing=()
for pkg in aapt zipalign apksigner android-framework-res; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    log "installing Debian packages: ${missing[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}" >&2 \
      || { apt-get update >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}" >&2; } \
      || die "apt-get install ${missing[*]} failed"
  else
    die "missing Debian packages: ${missing[*]} (run: sudo apt-get install -y ${missing[*]})"
  fi
fi
for t in aapt aapt2 zipalign apksigner; do
  command -v "$t" >/dev/null || die "$t not found after installing its package"
done
[ -f "$FRAMEWORK_RES" ] || die "$FRAMEWORK_RES not found (package android-framework-res)"

# --- Maven artifacts (step 1) ------------------------------------------------------------
# The path of the file for group:artifact:version[:type] (type jar by default) in $M2,
# fetched with Maven when absent.
m2_jar() {
  local g a v t path
  IFS=: read -r g a v t <<<"$1"
  path="$M2/${g//.//}/$a/$v/$a-$v.${t:-jar}"
  if [ ! -s "$path" ]; then
    log "fetching $1 into $M2 (once)"
    mvn -B -q -Dmaven.repo.local="$M2" dependency:get -Dartifact="$1" -Dtransitive=false >&2 \
      || die "mvn dependency:get $1 failed (Maven Central must be reachable on the first run)"
  fi
  [ -s "$path" ] || die "$path missing after mvn dependency:get"
  echo "$path"
}
ANDROID_JAR=$(m2_jar "$ANDROID_ALL")
R8_JAR=$(m2_jar "$R8")
SNIFFER_JAR=$(m2_jar "$SNIFFER")
ASM_JAR=$(m2_jar "$ASM")
SIGNATURE_FILE=$(m2_jar "$SIGNATURE")

# shellcheck source=lib/android-libs.sh
. "$HERE/lib/android-libs.sh"
# The variant with the RPC server (the app is its server).
LIB=$(android_lib --rpc arm64-v8a "${1:-}") || die "no arm64-v8a JNI library with the RPC server"
LIB_X86_64=$(android_lib --rpc x86_64 "${2:-}") || die "no x86_64 JNI library with the RPC server"
declare -A ABI_LIB=([arm64-v8a]="$LIB" [x86_64]="$LIB_X86_64")

rm -rf "$OUT"
mkdir -p "$OUT/res" "$OUT/gen" "$OUT/classes" "$OUT/dex" "$OUT/apk/lib/arm64-v8a" "$OUT/apk/lib/x86_64"

# --- resources and manifest (step 2) -----------------------------------------------------
log "aapt2 compile + link"
aapt2 compile --dir "$APP/src/main/res" -o "$OUT/res/res.zip" || die "aapt2 compile failed"
# The package attribute (the Gradle plugin refuses one in the source) and the API 29 work-arounds.
python3 "$APP/tools/aapt2_link.py" --framework "$FRAMEWORK_RES" \
  --manifest "$APP/src/main/AndroidManifest.xml" --package "$PACKAGE" \
  --min-sdk "$MIN_SDK" --target-sdk "$TARGET_SDK" --java "$OUT/gen" \
  --prepared "$OUT/AndroidManifest.xml" -o "$OUT/linked.apk" "$OUT/res/res.zip" \
  || die "aapt2 link failed"

# --- Java (step 3) -------------------------------------------------------------------------
log "javac --release 11 against $(basename "$ANDROID_JAR")"
find "$APP/src/main/java" "$OUT/gen" bindings-java/java/src/main/java -name '*.java' >"$OUT/sources.txt"
javac --release 11 -Xlint:all,-options,-classfile -Werror -encoding UTF-8 -cp "$ANDROID_JAR" \
  -d "$OUT/classes" @"$OUT/sources.txt" || die "javac failed"

# --- API level, dex (step 4) -----------------------------------------------------------------
JHOME=$(dirname "$(dirname "$(readlink -f "$(command -v javac)")")")
log "API $MIN_SDK check of the classes"
java -cp "$R8_JAR" com.android.tools.r8.BackportedMethodList --min-api "$MIN_SDK" \
  >"$OUT/backported.txt" || die "d8's BackportedMethodList failed"
api_check() { # api_check PACKAGE_DIR...: prints the findings, fails when there are any
  java -cp "$SNIFFER_JAR:$ASM_JAR" "$APP/tools/ApiLevelCheck.java" "$SIGNATURE_FILE" \
    "$OUT/backported.txt" "$OUT/classes" "$APP/src/main/java:$ROOT/bindings-java/java/src/main/java" "$@"
}
api_check org/mote/rpcapp/ >"$OUT/api-check.txt" 2>&1 || true
api_check org/mote/ -org/mote/rpcapp/ >"$OUT/api-check-bindings.txt" 2>&1 || true

log "d8 --min-api $MIN_SDK"
find "$OUT/classes" -name '*.class' >"$OUT/classes.txt"
java -cp "$R8_JAR" com.android.tools.r8.D8 --release --min-api "$MIN_SDK" \
  --lib "$ANDROID_JAR" --lib "$JHOME" --output "$OUT/dex" @"$OUT/classes.txt" || die "d8 failed"
[ -f "$OUT/dex/classes.dex" ] || die "d8 wrote no classes.dex"

# --- package, align, sign (steps 5, 6) ---------------------------------------------------------
cp "$OUT/linked.apk" "$OUT/unaligned.apk"
cp "$OUT/dex/classes.dex" "$OUT/apk/classes.dex"
for abi in arm64-v8a x86_64; do cp "${ABI_LIB[$abi]}" "$OUT/apk/lib/$abi/libmote_java.so"; done
(cd "$OUT/apk" && zip -q -X "$OUT/unaligned.apk" classes.dex) || die "zip failed"
zipalign -p -f 4 "$OUT/unaligned.apk" "$OUT/aligned.apk" || die "zipalign failed"
# The libraries go last, stored, each one's data at a multiple of 16 KB: Debian's zipalign (Android
# 10) aligns .so files to 4 KB only, and phones with 16 KB pages (Android 15+) map the library
# from the APK at a 16 KB boundary. The padding is an extra field of ID 0xd935 (the one
# zipalign uses); apksigner keeps an alignment that is already right.
for abi in arm64-v8a x86_64; do
python3 - "$OUT/aligned.apk" "lib/$abi/libmote_java.so" "$OUT/apk/lib/$abi/libmote_java.so" <<'PY' \
  || die "cannot add the $abi library to the APK"
import struct, sys, zipfile
apk, name, src = sys.argv[1:4]
data = open(src, "rb").read()
with zipfile.ZipFile(apk, "a") as z:
    start = z.start_dir  # the new local header replaces the old central directory
    info = zipfile.ZipInfo(name, date_time=(1981, 1, 1, 0, 0, 0))
    info.compress_type = zipfile.ZIP_STORED
    pad = (-(start + 30 + len(name.encode()) + 4)) % 16384
    info.extra = struct.pack("<HH", 0xD935, pad) + bytes(pad)
    z.writestr(info, data)
PY
done

if [ -n "${MOTE_ANDROID_KEYSTORE:-}" ]; then
  KEYSTORE=$MOTE_ANDROID_KEYSTORE
  [ -f "$KEYSTORE" ] || die "MOTE_ANDROID_KEYSTORE=$KEYSTORE does not exist"
else
  KEYSTORE="$MOTE_CACHE/android-debug.keystore"
  if [ ! -f "$KEYSTORE" ]; then
    mkdir -p "$MOTE_CACHE"
    tmp="$KEYSTORE.$$.tmp"
    old="$ROOT/target/android-app-key/debug.keystore"
    if [ -f "$old" ]; then
      # Where earlier versions of this script kept the key: keep signing with it, so that
      # the APK still installs over the ones built with it.
      log "moving the debug key from $old to $KEYSTORE"
      cp "$old" "$tmp"
    else
      log "generating a debug key in $KEYSTORE (once; never commit it)"
      keytool -genkeypair -keystore "$tmp" -storetype PKCS12 -storepass android \
        -keypass android -alias androiddebugkey -keyalg RSA -keysize 2048 -validity 10000 \
        -dname "CN=Android Debug,O=Android,C=US" >&2 2>/dev/null || die "keytool failed"
    fi
    # ln fails when another build made the key meanwhile: then both sign with that one.
    ln "$tmp" "$KEYSTORE" 2>/dev/null || [ -f "$KEYSTORE" ] || die "cannot create $KEYSTORE"
    rm -f "$tmp"
  fi
fi
APK="$OUT/mote-rpc.apk"
apksigner sign --ks "$KEYSTORE" --ks-pass pass:android --key-pass pass:android \
  --ks-key-alias androiddebugkey --min-sdk-version "$MIN_SDK" --out "$APK" "$OUT/aligned.apk" \
  || die "apksigner sign failed"

# --- checks (step 7) -------------------------------------------------------------------------
pass=0
fail=0
check() { # check NAME COMMAND...
  local name=$1
  shift
  if "$@" >/dev/null 2>&1; then
    pass=$((pass + 1))
    log "ok   $name"
  else
    fail=$((fail + 1))
    log "FAIL $name"
  fi
}
badging=$(aapt dump badging "$APK" 2>&1 || true)
has() { grep -qF -- "$1" <<<"$badging"; }
entries=$(unzip -v "$APK" 2>/dev/null || true)
so_stored() { grep -E " lib/$1/libmote_java\\.so\$" <<<"$entries" | grep -q ' Stored '; }
so_16k() {
  python3 - "$APK" "$1" <<'PY'
import struct, sys, zipfile
f = open(sys.argv[1], "rb")
info = zipfile.ZipFile(f).getinfo(f"lib/{sys.argv[2]}/libmote_java.so")
f.seek(info.header_offset)
n, e = struct.unpack("<HH", f.read(30)[26:30])
sys.exit((info.header_offset + 30 + n + e) % 16384 != 0)
PY
}
so_same() { unzip -p "$APK" "lib/$1/libmote_java.so" | cmp -s - "${ABI_LIB[$1]}"; }
# The packaged library has the RPC server: every native RpcBridge declares is exported (the
# inference library, built without mote-java's rpc feature, exports none of them).
so_has_rpc() {
  local want have
  want=$(grep -oE 'static native [][A-Za-z0-9_.<> ]+ +[A-Za-z0-9_]+ *\(' \
           "$ROOT/bindings-java/java/src/main/java/org/mote/rpc/RpcBridge.java" \
         | sed -E 's/.* ([A-Za-z0-9_]+) *\($/Java_org_mote_rpc_RpcBridge_\1/' | sort)
  unzip -p "$APK" "lib/$1/libmote_java.so" >"$OUT/check-$1.so"
  have=$(readelf --dyn-syms -W "$OUT/check-$1.so" \
         | awk '$1 ~ /^[0-9]+:$/ && $7 != "UND" && $8 ~ /^Java_org_mote_rpc_RpcBridge_/ { sub(/@.*/, "", $8); print $8 }' | sort -u)
  rm -f "$OUT/check-$1.so"
  [ -n "$want" ] && [ "$have" = "$want" ]
}
dex_present() { grep -qE ' classes\.dex$' <<<"$entries"; }
dex_has() { # the dex names each main class
  local c
  for c in Lorg/mote/rpcapp/MainActivity\; Lorg/mote/rpcapp/RpcService\; Lorg/mote/rpc/Server\; Lorg/mote/rpc/RpcBridge\;; do
    grep -qaF "$c" "$OUT/dex/classes.dex" || return 1
  done
}
dex_version() { [ "$(head -c 8 "$OUT/dex/classes.dex" | tr '\n\0' '_.')" = "dex_$1." ]; }
aapt dump xmltree "$APK" AndroidManifest.xml >"$OUT/manifest-xmltree.txt" 2>&1 || true
# xml_has PATH ATTRIBUTE VALUE: some element at PATH (names from the root, /-separated) has
# ATTRIBUTE with exactly VALUE, as `aapt dump xmltree` prints it after "=".
xml_has() {
  python3 - "$OUT/manifest-xmltree.txt" "$@" <<'PY'
import re, sys
tree, path, attr, want = sys.argv[1], sys.argv[2].split("/"), sys.argv[3], sys.argv[4]
stack = []  # (indent, name) of the open elements
for line in open(tree):
    m = re.match(r"( *)([EA]): ([^ (=]+)(?:\([^)]*\))?(?: \(line=\d+\))?(?:=(.*))?$", line.rstrip("\n"))
    if not m:
        continue
    indent, kind, name, value = len(m.group(1)), m.group(2), m.group(3), m.group(4)
    while stack and stack[-1][0] >= indent:
        stack.pop()
    if kind == "E":
        stack.append((indent, name))
    elif [n for _, n in stack] == path and name == attr and value == want:
        sys.exit(0)
sys.exit(1)
PY
}
PERMISSIONS="android.permission.ACCESS_NETWORK_STATE android.permission.FOREGROUND_SERVICE
android.permission.FOREGROUND_SERVICE_SPECIAL_USE android.permission.INTERNET
android.permission.POST_NOTIFICATIONS android.permission.WAKE_LOCK"
permissions_are() {
  [ "$(sed -n "s/^uses-permission: name='\([^']*\)'.*/\1/p" <<<"$badging" | sort | tr '\n' ' ')" \
    = "$(tr ' ' '\n' <<<"$PERMISSIONS" | sort | tr '\n' ' ')" ]
}
api_level_ok() { tail -n 1 "$1" | grep -q ' 0 findings'; }
api_summary() { tail -n 1 "$1" | sed 's/^api check: //; s/ (.*//'; }
cert_digest() { apksigner verify --print-certs "$1" | sed -n 's/^Signer #1 certificate SHA-256 digest: //p'; }
keystore_digest() {
  keytool -exportcert -keystore "$KEYSTORE" -storepass android -alias androiddebugkey 2>/dev/null \
    | sha256sum | cut -d' ' -f1
}
signed_by_keystore() { [ -n "$(cert_digest "$APK")" ] && [ "$(cert_digest "$APK")" = "$(keystore_digest)" ]; }
# The APK built again from a copy of the sources in an empty folder (a clean checkout: its
# own target/, nothing of this one's), signed by the same certificate.
clean_checkout_same_cert() {
  local tmp status=0 a b
  tmp=$(mktemp -d)
  mkdir -p "$tmp/scripts" "$tmp/android-app" "$tmp/bindings-java/java/src/main"
  mkdir -p "$tmp/scripts/lib"
  cp "$HERE/build-apk.sh" "$tmp/scripts/" && cp "$HERE/lib/android-libs.sh" "$tmp/scripts/lib/" \
    && cp -r "$APP/src" "$APP/tools" "$tmp/android-app/" \
    && cp -r "$ROOT/bindings-java/java/src/main/java" "$tmp/bindings-java/java/src/main/" \
    && MOTE_APK_CLEAN_CHECK=0 "$tmp/scripts/build-apk.sh" "$LIB" "$LIB_X86_64" \
      >"$OUT/clean-checkout-build.log" 2>&1 || status=1
  a=$(cert_digest "$APK")
  b=$(cert_digest "$tmp/target/android-app/mote-rpc.apk" 2>/dev/null || true)
  digests="this build $a, clean checkout ${b:-none}"
  rm -rf "$tmp"
  [ "$status" = 0 ] && [ -n "$a" ] && [ "$a" = "$b" ]
}

check "apksigner verify" apksigner verify "$APK"
check "zipalign -c -p 4" zipalign -c -p 4 "$APK"
check "package $PACKAGE" has "package: name='$PACKAGE'"
check "launchable activity" has "launchable-activity: name='$PACKAGE.MainActivity'"
check "native-code arm64-v8a and x86_64" has "native-code: 'arm64-v8a' 'x86_64'"
check "sdkVersion $MIN_SDK" has "sdkVersion:'$MIN_SDK'"
check "targetSdkVersion $TARGET_SDK" has "targetSdkVersion:'$TARGET_SDK'"
check "permissions exactly: $(tr '\n' ' ' <<<"$PERMISSIONS" | sed 's/android\.permission\.//g')" permissions_are
check "service foregroundServiceType specialUse (0x40000000)" \
  xml_has manifest/application/service 'android:foregroundServiceType' '(type 0x11)0x40000000'
check "service property PROPERTY_SPECIAL_USE_FGS_SUBTYPE" xml_has manifest/application/service/property \
  'android:name' '"android.app.PROPERTY_SPECIAL_USE_FGS_SUBTYPE" (Raw: "android.app.PROPERTY_SPECIAL_USE_FGS_SUBTYPE")'
check "uses-native-library libOpenCL.so" xml_has manifest/application/uses-native-library \
  'android:name' '"libOpenCL.so" (Raw: "libOpenCL.so")'
check "uses-native-library required false" xml_has manifest/application/uses-native-library \
  'android:required' '(type 0x12)0x0'
for abi in arm64-v8a x86_64; do
  check "lib/$abi/libmote_java.so stored uncompressed" so_stored "$abi"
  check "lib/$abi/libmote_java.so data at a multiple of 16 KB" so_16k "$abi"
  check "lib/$abi/libmote_java.so is the built library" so_same "$abi"
  check "lib/$abi/libmote_java.so has the RPC server (exports every RpcBridge native)" so_has_rpc "$abi"
done
check "classes.dex present" dex_present
check "classes.dex holds the app and org.mote.rpc" dex_has
check "classes.dex format 037 (d8 --min-api 24)" dex_version 037
check "app classes use API $MIN_SDK only, or behind @TargetApi ($(api_summary "$OUT/api-check.txt"))" \
  api_level_ok "$OUT/api-check.txt"
check "bindings-java classes use API $MIN_SDK only, or behind @Api26 ($(api_summary "$OUT/api-check-bindings.txt"))" \
  api_level_ok "$OUT/api-check-bindings.txt"
check "signed with the certificate of $KEYSTORE" signed_by_keystore
if [ "${MOTE_APK_CLEAN_CHECK:-1}" != 0 ]; then
  check "a build from a clean checkout is signed by the same certificate" clean_checkout_same_cert
  log "     certificate SHA-256: $digests"
fi

for f in "$OUT/api-check.txt" "$OUT/api-check-bindings.txt"; do
  api_level_ok "$f" || sed 's/^/build-apk:   /' "$f" >&2
done
echo "apk checks: $pass passed, $fail failed" >&2
[ "$fail" = 0 ] || exit 1
echo "$APK"
