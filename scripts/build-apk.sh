#!/usr/bin/env bash
# Build the Mote RPC app (android-app/) as a signed APK without the Android SDK or Gradle:
#
#   scripts/build-apk.sh [LIB]   -> last stdout line: path of target/android-app/mote-rpc.apk
#
# LIB is the arm64 JNI library (default: built by scripts/build-android-so.sh). Steps (the
# recipe: ../shared/TOOLCHAINS.md section 3, in our words in android-app/README.md):
#   1. Maven fetches into $MOTE_CACHE/m2 (once; later runs do not call Maven):
#      org.robolectric:android-all:15-robolectric-13954326 (API 35 framework classes, the
#      compile class path) and com.android.tools:r8:9.5.28 (d8, the dexer).
#   2. aapt2 compile + link the manifest (plus the package attribute) and
#      android-app/src/main/res against Debian's
#      /usr/share/android-framework-res/framework-res.apk (API 29), min SDK 33, target 35;
#      `--java` writes R.java.
#   3. javac --release 11 of the app, R.java and bindings-java's org.mote + org.mote.rpc
#      sources against android-all (a class path, not a boot class path: it has no java.lang),
#      all lints as errors but "classfile" (android-all's annotations name members that
#      javac cannot see).
#   4. d8 --min-api 33 -> classes.dex.
#   5. classes.dex is added (deflated), zipalign -p -f 4 aligns resources.arsc, then
#      lib/arm64-v8a/libmote_java.so is appended stored (the manifest says
#      extractNativeLibs="false": the phone maps it straight from the APK) with its data at a
#      multiple of 16 KB (the page size of some Android 15+ phones).
#   6. apksigner signs with a debug key that keytool generates on the first build
#      (target/android-app-key/debug.keystore, kept across builds so reinstalls update).
#   7. Checks, printed as "apk checks: N passed, M failed" (exit 1 when M > 0).
#
# Debian packages aapt (aapt, aapt2), zipalign, apksigner and android-framework-res are
# installed with apt-get when missing and running as root; otherwise the script stops and says
# what to install. Nothing here installs or runs the APK on a device.
#
# Environment:
#   MOTE_CACHE   cache folder (default ~/.cache/mote); the Maven repository is $MOTE_CACHE/m2
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
ROOT=$(git -C "$HERE" rev-parse --show-toplevel 2>/dev/null || (cd "$HERE/.." && pwd -P))
cd "$ROOT"

MOTE_CACHE="${MOTE_CACHE:-$HOME/.cache/mote}"
M2="$MOTE_CACHE/m2"
APP="$ROOT/android-app"
OUT="$ROOT/target/android-app"
KEYDIR="$ROOT/target/android-app-key"
PACKAGE=org.mote.rpcapp
MIN_SDK=33
TARGET_SDK=35
ANDROID_ALL=org.robolectric:android-all:15-robolectric-13954326
R8=com.android.tools:r8:9.5.28
FRAMEWORK_RES=/usr/share/android-framework-res/framework-res.apk

log() { echo "build-apk: $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# --- tools -------------------------------------------------------------------------------
for t in javac java jar keytool mvn zip unzip python3; do
  command -v "$t" >/dev/null || die "$t is not installed (javac/java/jar/keytool: apt-get install openjdk-17-jdk-headless; mvn: maven; zip, unzip, python3)"
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
# The path of the jar for group:artifact:version in $M2, fetched with Maven when absent.
m2_jar() {
  local g a v path
  IFS=: read -r g a v <<<"$1"
  path="$M2/${g//.//}/$a/$v/$a-$v.jar"
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

LIB=${1:-}
if [ -z "$LIB" ]; then
  LIB=$("$HERE/build-android-so.sh" | tail -n 1)
fi
[ -f "$LIB" ] || die "no JNI library at '$LIB'"

rm -rf "$OUT"
mkdir -p "$OUT/res" "$OUT/gen" "$OUT/classes" "$OUT/dex" "$OUT/apk/lib/arm64-v8a"

# --- resources and manifest (step 2) -----------------------------------------------------
log "aapt2 compile + link"
aapt2 compile --dir "$APP/src/main/res" -o "$OUT/res/res.zip" || die "aapt2 compile failed"
# The source manifest has no package attribute (the Gradle plugin refuses one): add it.
sed "0,/<manifest /s//<manifest package=\"$PACKAGE\" /" "$APP/src/main/AndroidManifest.xml" \
  >"$OUT/AndroidManifest.xml"
grep -q "package=\"$PACKAGE\"" "$OUT/AndroidManifest.xml" || die "cannot set the package in the manifest"
aapt2 link -I "$FRAMEWORK_RES" --manifest "$OUT/AndroidManifest.xml" \
  --min-sdk-version "$MIN_SDK" --target-sdk-version "$TARGET_SDK" \
  --java "$OUT/gen" -o "$OUT/linked.apk" "$OUT/res/res.zip" || die "aapt2 link failed"

# --- Java (step 3) -------------------------------------------------------------------------
log "javac --release 11 against $(basename "$ANDROID_JAR")"
find "$APP/src/main/java" "$OUT/gen" bindings-java/java/src/main/java -name '*.java' >"$OUT/sources.txt"
javac --release 11 -Xlint:all,-options,-classfile -Werror -encoding UTF-8 -cp "$ANDROID_JAR" \
  -d "$OUT/classes" @"$OUT/sources.txt" || die "javac failed"

# --- dex (step 4) ----------------------------------------------------------------------------
log "d8 --min-api $MIN_SDK"
JHOME=$(dirname "$(dirname "$(readlink -f "$(command -v javac)")")")
find "$OUT/classes" -name '*.class' >"$OUT/classes.txt"
java -cp "$R8_JAR" com.android.tools.r8.D8 --release --min-api "$MIN_SDK" \
  --lib "$ANDROID_JAR" --lib "$JHOME" --output "$OUT/dex" @"$OUT/classes.txt" || die "d8 failed"
[ -f "$OUT/dex/classes.dex" ] || die "d8 wrote no classes.dex"

# --- package, align, sign (steps 5, 6) ---------------------------------------------------------
cp "$OUT/linked.apk" "$OUT/unaligned.apk"
cp "$OUT/dex/classes.dex" "$OUT/apk/classes.dex"
cp "$LIB" "$OUT/apk/lib/arm64-v8a/libmote_java.so"
(cd "$OUT/apk" && zip -q -X "$OUT/unaligned.apk" classes.dex) || die "zip failed"
zipalign -p -f 4 "$OUT/unaligned.apk" "$OUT/aligned.apk" || die "zipalign failed"
# The library goes last, stored, its data at a multiple of 16 KB: Debian's zipalign (Android
# 10) aligns .so files to 4 KB only, and phones with 16 KB pages (Android 15+) map the library
# from the APK at a 16 KB boundary. The padding is an extra field of ID 0xd935 (the one
# zipalign uses); apksigner keeps an alignment that is already right.
python3 - "$OUT/aligned.apk" lib/arm64-v8a/libmote_java.so "$OUT/apk/lib/arm64-v8a/libmote_java.so" <<'PY' \
  || die "cannot add the library to the APK"
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

KEYSTORE="$KEYDIR/debug.keystore"
if [ ! -f "$KEYSTORE" ]; then
  log "generating a debug key in $KEYSTORE (never commit it)"
  mkdir -p "$KEYDIR"
  keytool -genkeypair -keystore "$KEYSTORE" -storepass android -keypass android \
    -alias androiddebugkey -keyalg RSA -keysize 2048 -validity 10000 \
    -dname "CN=Mote Debug,O=Mote,C=US" >&2 2>/dev/null || die "keytool failed"
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
so_stored() { grep -E ' lib/arm64-v8a/libmote_java\.so$' <<<"$entries" | grep -q ' Stored '; }
so_16k() {
  python3 - "$APK" <<'PY'
import struct, sys, zipfile
f = open(sys.argv[1], "rb")
info = zipfile.ZipFile(f).getinfo("lib/arm64-v8a/libmote_java.so")
f.seek(info.header_offset)
n, e = struct.unpack("<HH", f.read(30)[26:30])
sys.exit((info.header_offset + 30 + n + e) % 16384 != 0)
PY
}
so_same() { unzip -p "$APK" lib/arm64-v8a/libmote_java.so | cmp -s - "$LIB"; }
dex_present() { grep -qE ' classes\.dex$' <<<"$entries"; }
dex_has() { # the dex names each main class
  local c
  for c in Lorg/mote/rpcapp/MainActivity\; Lorg/mote/rpcapp/RpcService\; Lorg/mote/rpc/Server\; Lorg/mote/rpc/RpcBridge\;; do
    grep -qaF "$c" "$OUT/dex/classes.dex" || return 1
  done
}
manifest=$(aapt dump xmltree "$APK" AndroidManifest.xml 2>&1 || true)
fgs_data_sync() { grep -A4 'E: service' <<<"$manifest" | grep -q 'foregroundServiceType.*=(type 0x11)0x1$'; }
perm() { grep -q "uses-permission: name='$1'" <<<"$badging"; }

check "apksigner verify" apksigner verify "$APK"
check "zipalign -c -p 4" zipalign -c -p 4 "$APK"
check "package $PACKAGE" has "package: name='$PACKAGE'"
check "launchable activity" has "launchable-activity: name='$PACKAGE.MainActivity'"
check "native-code arm64-v8a" has "native-code: 'arm64-v8a'"
check "sdkVersion $MIN_SDK" has "sdkVersion:'$MIN_SDK'"
check "targetSdkVersion $TARGET_SDK" has "targetSdkVersion:'$TARGET_SDK'"
check "INTERNET permission" perm android.permission.INTERNET
check "FOREGROUND_SERVICE_DATA_SYNC permission" perm android.permission.FOREGROUND_SERVICE_DATA_SYNC
check "service is foregroundServiceType dataSync" fgs_data_sync
check "libmote_java.so stored uncompressed" so_stored
check "libmote_java.so data at a multiple of 16 KB" so_16k
check "libmote_java.so is the built library" so_same
check "classes.dex present" dex_present
check "classes.dex holds the app and org.mote.rpc" dex_has

echo "apk checks: $pass passed, $fail failed" >&2
[ "$fail" = 0 ] || exit 1
echo "$APK"
