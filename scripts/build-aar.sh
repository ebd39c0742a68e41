#!/usr/bin/env bash
# Package the Java bindings as Android libraries (AARs) in a Maven repository folder:
#
#   scripts/build-aar.sh [ARM64_LIB X86_64_LIB [ARM64_RPC_LIB X86_64_RPC_LIB]]
#                                -> last stdout line: the repository folder (target/android-repo)
#
# Two artifacts, alternatives to each other (the same class and library names: an app depends on
# one of them, never both):
#   org.mote:mote-android       the inference library: the org.mote classes (no org.mote.rpc)
#                               and the JNI libraries built without the RPC server (ARM64_LIB,
#                               X86_64_LIB; default: scripts/build-android-so.sh ABI);
#   org.mote:mote-android-rpc   the same plus Mote's RPC server: the org.mote and org.mote.rpc
#                               classes and the JNI libraries built with mote-java's `rpc`
#                               feature (ARM64_RPC_LIB, X86_64_RPC_LIB; default:
#                               scripts/build-android-so.sh --rpc ABI). The RPC app's variant.
# An empty argument means the default. armeabi-v7a is not built (docs/android.md, section 6).
#
#   scripts/build-aar.sh --selective ARM64_LIB [X86_64_LIB]
#                                -> last stdout line: the AAR (in target/android-repo-selective)
#
# packs a selective build's library (scripts/build-selective.sh --target android-arm64 --aar)
# as org.mote:mote-android in its own repository folder: the inference classes and only the
# ABIs given (TFLite's selective AARs are arm64-only too; docs/footprint.md).
# Each AAR is a zip holding:
#   AndroidManifest.xml         bindings-java/android/AndroidManifest.xml (package org.mote, minSdk)
#   classes.jar                 the Maven project's main classes of those packages (not their
#                               subpackages: no org.mote.tvm4j), compiled by javac --release 11
#   jni/arm64-v8a/libmote_java.so
#   jni/x86_64/libmote_java.so  (the emulator's ABI)
#   proguard.txt                consumer shrinker rules: bindings-java/android/proguard.txt, and
#                               for the rpc AAR proguard-rpc.txt after it
#   R.txt                       empty: the library has no Android resources
# and is laid out with its POM as org/mote/ARTIFACT/0.1.0/ under the repository folder, so an
# app adds the folder as a Maven repository and depends on org.mote:mote-android:0.1.0 (or
# org.mote:mote-android-rpc:0.1.0).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
ROOT=$(cd "$HERE/.." && pwd -P)
cd "$ROOT"

GROUP=org.mote
VERSION=0.1.0
REPO="$ROOT/target/android-repo"
WORK="$ROOT/target/aar"
SRC=bindings-java/java/src/main/java

log() { echo "build-aar: $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

for t in javac jar sha1sum md5sum; do
  command -v "$t" >/dev/null || die "$t is not installed (javac/jar: apt-get install openjdk-17-jdk-headless)"
done

# shellcheck source=lib/android-libs.sh
. "$HERE/lib/android-libs.sh"
SELECTIVE=0
if [ "${1:-}" = --selective ]; then
  SELECTIVE=1
  [ $# -ge 2 ] && [ $# -le 3 ] || die "usage: $0 --selective ARM64_LIB [X86_64_LIB]"
  LIB=$2 LIB_X86_64=${3:-}
  for f in "$LIB" $LIB_X86_64; do [ -f "$f" ] || die "no library $f"; done
  REPO="$ROOT/target/android-repo-selective"
  WORK="$ROOT/target/aar-selective"
else
LIB=$(android_lib arm64-v8a "${1:-}") || die "no arm64-v8a JNI library"
LIB_X86_64=$(android_lib x86_64 "${2:-}") || die "no x86_64 JNI library"
LIB_RPC=$(android_lib --rpc arm64-v8a "${3:-}") || die "no arm64-v8a JNI library with the RPC server"
LIB_RPC_X86_64=$(android_lib --rpc x86_64 "${4:-}") || die "no x86_64 JNI library with the RPC server"
fi

rm -rf "$WORK"

# aar ARTIFACT NAME DESCRIPTION ARM64_LIB X86_64_LIB "PROGUARD_FILES" "PACKAGE_DIRS": compiles the
# sources of PACKAGE_DIRS (folders under $SRC, without their subfolders) into classes.jar, packs
# the AAR and writes its POM, maven-metadata.xml and checksums.
aar() {
  local artifact=$1 name=$2 description=$3 arm64=$4 x86_64=$5 proguard=$6 packages=$7
  local w="$WORK/$artifact" srcs=() p f
  mkdir -p "$w/classes" "$w/aar/jni/arm64-v8a"
  for p in $packages; do
    for f in "$SRC/$p"/*.java; do srcs+=("$f"); done
  done
  # classes.jar: the same sources and flags as the Maven build (release 11, all lints as
  # errors), without the network or Maven's cache.
  log "$artifact: compiling $packages (${#srcs[@]} sources)"
  javac --release 11 -Xlint:all -Werror -encoding UTF-8 -d "$w/classes" "${srcs[@]}" \
    || die "javac failed ($artifact)"
  jar --create --no-manifest --no-compress --file "$w/aar/classes.jar" -C "$w/classes" . || die "jar failed ($artifact)"

  cp bindings-java/android/AndroidManifest.xml "$w/aar/AndroidManifest.xml"
  : >"$w/aar/proguard.txt"
  for f in $proguard; do cat "bindings-java/android/$f" >>"$w/aar/proguard.txt"; done
  : >"$w/aar/R.txt"
  cp "$arm64" "$w/aar/jni/arm64-v8a/libmote_java.so"
  if [ -n "$x86_64" ]; then
    mkdir -p "$w/aar/jni/x86_64"
    cp "$x86_64" "$w/aar/jni/x86_64/libmote_java.so"
  fi

  local base="$REPO/${GROUP//.//}/$artifact"
  local dest="$base/$VERSION"
  rm -rf "$base"
  mkdir -p "$dest"
  local out="$dest/$artifact-$VERSION.aar"
  # An AAR is a plain zip; `jar --no-manifest` writes one without adding META-INF/.
  (cd "$w/aar" && jar --create --no-manifest --file "$out" AndroidManifest.xml classes.jar R.txt proguard.txt jni) \
    || die "cannot write $out"

  cat >"$dest/$artifact-$VERSION.pom" <<POM
<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0"
         xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"
         xsi:schemaLocation="http://maven.apache.org/POM/4.0.0 https://maven.apache.org/xsd/maven-4.0.0.xsd">
  <modelVersion>4.0.0</modelVersion>
  <groupId>$GROUP</groupId>
  <artifactId>$artifact</artifactId>
  <version>$VERSION</version>
  <packaging>aar</packaging>
  <name>$name</name>
  <description>$description</description>
  <licenses>
    <license><name>MIT</name></license>
  </licenses>
</project>
POM

  cat >"$base/maven-metadata.xml" <<META
<?xml version="1.0" encoding="UTF-8"?>
<metadata>
  <groupId>$GROUP</groupId>
  <artifactId>$artifact</artifactId>
  <versioning>
    <latest>$VERSION</latest>
    <release>$VERSION</release>
    <versions><version>$VERSION</version></versions>
    <lastUpdated>$(date -u +%Y%m%d%H%M%S)</lastUpdated>
  </versioning>
</metadata>
META

  # Checksums, as a remote Maven repository serves them.
  for f in "$out" "$dest/$artifact-$VERSION.pom" "$base/maven-metadata.xml"; do
    sha1sum "$f" | cut -d' ' -f1 >"$f.sha1"
    md5sum "$f" | cut -d' ' -f1 >"$f.md5"
  done
  log "wrote $out ($(stat -c %s "$out") bytes)"
  AAR_OUT=$out
}

if [ "$SELECTIVE" = 1 ]; then
  aar mote-android "Mote for Android (selective build)" \
    "Java bindings of Mote with a selective build of the JNI library (scripts/build-selective.sh: only what the app's models need), for Android apps: the inference library, without the RPC server." \
    "$LIB" "$LIB_X86_64" "proguard.txt" "org/mote"
  printf '%s\n' "$AAR_OUT"
  exit 0
fi

aar mote-android "Mote for Android" \
  "Java bindings of Mote with the arm64-v8a and x86_64 JNI libraries, for Android apps: the inference library, without the RPC server (no org.mote.rpc). An alternative to org.mote:mote-android-rpc, which has the same class and library names: depend on one of the two, never both." \
  "$LIB" "$LIB_X86_64" "proguard.txt" "org/mote"
aar mote-android-rpc "Mote for Android, with the RPC server" \
  "Java bindings of Mote with the arm64-v8a and x86_64 JNI libraries, for Android apps: everything of org.mote:mote-android plus Mote's RPC server (org.mote.rpc.Server, which TVM's Python client drives) in the classes and the JNI libraries. An alternative to org.mote:mote-android, which has the same class and library names: depend on one of the two, never both." \
  "$LIB_RPC" "$LIB_RPC_X86_64" "proguard.txt proguard-rpc.txt" "org/mote org/mote/rpc"

printf '%s\n' "$REPO"
