#!/usr/bin/env bash
# Package the Java bindings as an Android library (AAR) in a Maven repository folder:
#
#   scripts/build-aar.sh [ARM64_LIB [X86_64_LIB]]   -> last stdout line: the repository folder
#                                                    (target/android-repo)
#
# ARM64_LIB and X86_64_LIB are the JNI libraries of the two ABIs (default: built by
# scripts/build-android-so.sh). armeabi-v7a is not built (docs/android.md, section 6). The AAR
# is a zip holding:
#   AndroidManifest.xml         bindings-java/android/AndroidManifest.xml (package org.mote, minSdk)
#   classes.jar                 the Maven project's main classes, compiled by javac --release 11
#   jni/arm64-v8a/libmote_java.so
#   jni/x86_64/libmote_java.so  (the emulator's ABI)
#   proguard.txt                consumer shrinker rules (bindings-java/android/proguard.txt)
#   R.txt                       empty: the library has no Android resources
# and is laid out with its POM as org/mote/mote-android/0.1.0/ under the repository folder, so
# an app adds the folder as a Maven repository and depends on org.mote:mote-android:0.1.0.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
ROOT=$(cd "$HERE/.." && pwd -P)
cd "$ROOT"

GROUP=org.mote
ARTIFACT=mote-android
VERSION=0.1.0
REPO="$ROOT/target/android-repo"
WORK="$ROOT/target/aar"

log() { echo "build-aar: $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

for t in javac jar sha1sum md5sum; do
  command -v "$t" >/dev/null || die "$t is not installed (javac/jar: apt-get install openjdk-17-jdk-headless)"
done

# shellcheck source=lib/android-libs.sh
. "$HERE/lib/android-libs.sh"
LIB=$(android_lib arm64-v8a "${1:-}") || die "no arm64-v8a JNI library"
LIB_X86_64=$(android_lib x86_64 "${2:-}") || die "no x86_64 JNI library"

rm -rf "$WORK"
mkdir -p "$WORK/classes" "$WORK/aar/jni/arm64-v8a" "$WORK/aar/jni/x86_64"

# classes.jar: the same sources and flags as the Maven build (release 11, all lints as errors),
# without the network or Maven's cache.
log "compiling the Java sources"
javac --release 11 -Xlint:all -Werror -encoding UTF-8 -d "$WORK/classes" \
  bindings-java/java/src/main/java/org/mote/*.java bindings-java/java/src/main/java/org/mote/rpc/*.java \
  || die "javac failed"
jar --create --no-manifest --file "$WORK/aar/classes.jar" -C "$WORK/classes" . || die "jar failed"

cp bindings-java/android/AndroidManifest.xml "$WORK/aar/AndroidManifest.xml"
cp bindings-java/android/proguard.txt "$WORK/aar/proguard.txt"
: >"$WORK/aar/R.txt"
cp "$LIB" "$WORK/aar/jni/arm64-v8a/libmote_java.so"
cp "$LIB_X86_64" "$WORK/aar/jni/x86_64/libmote_java.so"

dest="$REPO/${GROUP//.//}/$ARTIFACT/$VERSION"
rm -rf "$REPO/${GROUP//.//}/$ARTIFACT"
mkdir -p "$dest"
aar="$dest/$ARTIFACT-$VERSION.aar"
# An AAR is a plain zip; `jar --no-manifest` writes one without adding META-INF/.
(cd "$WORK/aar" && jar --create --no-manifest --file "$aar" AndroidManifest.xml classes.jar R.txt proguard.txt jni) \
  || die "cannot write $aar"

cat >"$dest/$ARTIFACT-$VERSION.pom" <<EOF
<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0"
         xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"
         xsi:schemaLocation="http://maven.apache.org/POM/4.0.0 https://maven.apache.org/xsd/maven-4.0.0.xsd">
  <modelVersion>4.0.0</modelVersion>
  <groupId>$GROUP</groupId>
  <artifactId>$ARTIFACT</artifactId>
  <version>$VERSION</version>
  <packaging>aar</packaging>
  <name>Mote for Android</name>
  <description>Java bindings of Mote with the arm64-v8a and x86_64 JNI libraries, for Android apps</description>
  <licenses>
    <license><name>MIT</name></license>
  </licenses>
</project>
EOF

cat >"$REPO/${GROUP//.//}/$ARTIFACT/maven-metadata.xml" <<EOF
<?xml version="1.0" encoding="UTF-8"?>
<metadata>
  <groupId>$GROUP</groupId>
  <artifactId>$ARTIFACT</artifactId>
  <versioning>
    <latest>$VERSION</latest>
    <release>$VERSION</release>
    <versions><version>$VERSION</version></versions>
    <lastUpdated>$(date -u +%Y%m%d%H%M%S)</lastUpdated>
  </versioning>
</metadata>
EOF

# Checksums, as a remote Maven repository serves them.
for f in "$aar" "$dest/$ARTIFACT-$VERSION.pom" "$REPO/${GROUP//.//}/$ARTIFACT/maven-metadata.xml"; do
  sha1sum "$f" | cut -d' ' -f1 >"$f.sha1"
  md5sum "$f" | cut -d' ' -f1 >"$f.md5"
done

log "wrote $aar ($(stat -c %s "$aar") bytes)"
printf '%s\n' "$REPO"
