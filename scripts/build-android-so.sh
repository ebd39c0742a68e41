#!/usr/bin/env bash
# Build the Java bindings' JNI library for Android:
#
#   scripts/build-android-so.sh [--rpc | --selective=FEATURES] [ABI]
#       ABI: arm64-v8a (default) or x86_64
#       -> last stdout line: path of target/android/ABI/libmote_java.so, the inference
#          library (mote-java without its `rpc` feature: no RPC server; the
#          org.mote:mote-android AAR), or with --rpc of target/android/rpc/ABI/libmote_java.so,
#          built with mote-java's `rpc` feature (the RPC server, mote-rpc, and org.mote.rpc's
#          natives; the RPC app and the org.mote:mote-android-rpc AAR). Both variants coexist.
#          --selective=FEATURES (comma-separated mote-java features, e.g. `cpu-backend`, or
#          empty): a selective inference library with only those, in
#          target/android/selective/ABI/ (scripts/build-selective.sh --target android-ABI).
#
# Compiles `mote-java` in the trixie chroot (scripts/in-trixie.sh) with trixie's Rust 1.85,
# building the standard library from source (-Zbuild-std; no rustup target is downloadable here)
# for aarch64-linux-android or x86_64-linux-android.
#
# What the library must be for a phone to load models with it (docs/android.md):
# - it exports the TVM symbols model libraries import (TVMFFIErrorSetRaisedFromCStrParts,
#   TVMFFIEnvModRegisterSystemLibSymbol, TVMBackendAllocWorkspace/FreeWorkspace/
#   ParallelLaunch/ParallelBarrier, and TVMBackendAnyList* for exec_mode="compiled") beside the JNI entry points: rustc's version script for a
#   cdylib already lists exactly those and hides the rest, so no --exclude-libs (which would
#   hide the runtime's symbols, which come from an archive, the `mote` rlib);
# - it is linked with `-z global` (DF_1_GLOBAL), so bionic puts it in its namespace's global
#   group and a model dlopen'ed later resolves those symbols against it;
# - it carries its own unwinder (bindings-java/android/unwind, the `unwinding` crate, linked
#   as `-lunwind`), so it imports nothing from bionic above API 21 (libc.so exports
#   `_Unwind_*` only from API 30). Its symbols stay local: the static library is not a Rust
#   dependency of the cdylib, so rustc's export list does not name them.
#
# Linking, two routes:
# - ANDROID_NDK_HOME set: the NDK's clang for API $MOTE_ANDROID_API links, against the NDK's
#   own bionic stubs (the NDK folder is bound into the chroot).
# - Otherwise (every machine here: no NDK is reachable): Debian's `ld.lld` (package `lld` in
#   scripts/trixie.sh) links against stub libc.so/libm.so/libdl.so/liblog.so that this script
#   generates, the way the NDK's own stubs work: a stub only tells the linker which library
#   defines a symbol, so the output gets the right NEEDED entries; on the phone bionic's real
#   libraries are loaded. The linker wrapper (target/android/ld-wrapper.sh) links twice: first
#   against empty stubs to learn the symbols the library imports, then against stubs that
#   define exactly those symbols, with --no-undefined. The import lists are checked in
#   (bindings-java/android/stubs/*.txt) so a review sees what the library needs from Android;
#   this script fails when a build imports something else (drift), and rewrites the lists
#   with MOTE_ANDROID_UPDATE_STUBS=1. One list per library and variant: lib<l>.txt for the
#   inference library, lib<l>-rpc.txt for --rpc (the RPC server adds sockets, name lookup...),
#   under stubs/ for arm64-v8a and stubs/x86_64/ for x86_64.
#   Stub symbols carry no version. bionic's dynamic linker resolves an unversioned reference
#   to the symbol's default version (only a versioned reference must name a version the
#   library defines), so the output loads on every API level that has each symbol; see
#   bindings-java/README.md ("Android") for the API level this route needs and why.
#
# Either way: SONAME libmote_java.so, LOAD segments aligned to 16 KB (-z max-page-size=16384),
# text relocations refused (-z text). scripts/audit-android-so.sh checks the result, and
# scripts/bionic-resolve.py resolves its imports and a model's against bionic's rules.
#
# Environment:
#   ANDROID_NDK_HOME            an Android NDK (r23 or newer); unset = the stub route
#   MOTE_ANDROID_API            API level for the NDK's clang (default 24, the AAR's minSdk)
#   MOTE_ANDROID_UPDATE_STUBS=1 rewrite bindings-java/android/stubs/[ABI/]lib*[-rpc].txt (this
#                               variant's) from this build
#   MOTE_ANDROID_PROFILE        cargo profile (default mobile: release with one codegen unit)
#   MOTE_ANDROID_OPT_LEVEL      the profile's opt-level for this build (e.g. `s`: what
#                               scripts/build-selective.sh passes for a library without the cpu
#                               backend, which has no kernel of its own; docs/footprint.md)
#   MOTE_ANDROID_LTO            the profile's `lto` for this build (`fat`: what
#                               scripts/build-selective.sh passes with opt-level `s`)
#   MOTE_ANDROID_RUSTFLAGS      RUSTFLAGS for every crate of this build, the standard library
#                               included (scripts/build-selective.sh: `-Zlocation-detail=none`)
#   MOTE_ANDROID_LD_EXTRA       more ld.lld options (scripts/build-selective.sh: `--icf=all`)
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
ROOT=$(git -C "$HERE" rev-parse --show-toplevel 2>/dev/null || (cd "$HERE/.." && pwd -P))
# The trixie builds' target folder (scripts/in-trixie.sh); the unwinder and the linker
# wrappers are kept inside it too.
export MOTE_CACHE=${MOTE_CACHE:-$HOME/.cache/mote}
TRIXIE_TARGET=${MOTE_TRIXIE_TARGET:-$MOTE_CACHE/target-trixie}
cd "$ROOT"

RPC=0 SELECTIVE=0 SELECTED=""
case "${1:-}" in
  --rpc) RPC=1; shift ;;
  --selective=*) SELECTIVE=1; SELECTED=${1#--selective=}; shift ;;
esac
ABI=${1:-arm64-v8a}
FEATURES=()
log() { echo "build-android-so: $*" >&2; }
die() { log "ERROR: $*"; exit 1; }
case "$ABI" in
  arm64-v8a) TARGET=aarch64-linux-android GNU=aarch64-linux-gnu LISTS="$ROOT/bindings-java/android/stubs"
             ARCH_LD=(--fix-cortex-a53-843419) ;;
  # x86_64 (the emulator's ABI): without the cpu backend's AVX-512 level, which needs Rust 1.89
  # (the AVX2 and scalar levels remain, picked at run time): the default features but avx512.
  x86_64) TARGET=x86_64-linux-android GNU=x86_64-linux-gnu LISTS="$ROOT/bindings-java/android/stubs/x86_64"
          ARCH_LD=() FEATURES=(--no-default-features --features cpu-backend,opencl) ;;
  *) die "unknown ABI '$ABI' (arm64-v8a or x86_64; armeabi-v7a is not built: docs/android.md, section 6)" ;;
esac
# x86_64 builds in a cargo folder of its own inside that one, so that the two ABIs can build at
# the same time (scripts/test-android.sh does): cargo holds a folder's lock for a whole build.
if [ "$ABI" = x86_64 ]; then TRIXIE_TARGET=$TRIXIE_TARGET/android-x86_64; fi
PROFILE=${MOTE_ANDROID_PROFILE:-mobile}
API=${MOTE_ANDROID_API:-24}
OUT="$ROOT/target/android/$ABI"
# The variant's import lists: lib<l>.txt (inference) or lib<l>-rpc.txt.
LIST_SUFFIX=""
if [ "$RPC" = 1 ]; then
  FEATURES+=(--features rpc)
  OUT="$ROOT/target/android/rpc/$ABI"
  LIST_SUFFIX=-rpc
fi
# A selective build (scripts/build-selective.sh --target android-ABI): mote-java with exactly
# the features named (`--selective=` for none), into target/android/selective/ABI. Its imports
# must be a subset of the inference library's checked-in lists (leaving code out can only
# drop imports).
if [ "$SELECTIVE" = 1 ]; then
  case ",$SELECTED," in *,rpc,*) die "--selective builds inference libraries: rpc is not selectable (use --rpc)" ;; esac
  FEATURES=(--no-default-features)
  [ -z "$SELECTED" ] || FEATURES+=(--features "$SELECTED")
  OUT="$ROOT/target/android/selective/$ABI"
fi
LIBS="c m dl log"

mkdir -p "$OUT"
rm -f "$OUT/libmote_java.so"

# Both routes: SONAME, 16 KB page alignment, no text relocations, GNU and SysV hash tables.
# --fix-cortex-a53-843419: the erratum workaround the NDK's clang always passes for arm64.
# --strip-debug: the release profile's line tables are 13 of the 14 MB (the symbol table stays,
# so a crash report still names functions).
# Passed to rustc for the final crate only (`cargo rustc -- ...`), so changing them relinks
# without rebuilding the standard library.
# -z global: DF_1_GLOBAL (see above). --eh-frame-hdr: the unwinder finds the tables through it.
# --pack-dyn-relocs=android: the dynamic relocations in Android's packed format
# (DT_ANDROID_RELA), which bionic applies from API 23, below the AAR's minSdk 24: about 100 KB
# less than plain RELA (docs/footprint.md). Not RELR: bionic reads DT_ANDROID_RELR from API 28
# and DT_RELR from 30 (scripts/bionic-resolve.py checks the tags against the minSdk).
COMMON_LD=(-soname libmote_java.so -z global -z max-page-size=16384 -z text -z noexecstack
           --hash-style=both --build-id=sha1 --eh-frame-hdr --pack-dyn-relocs=android
           "${ARCH_LD[@]}" --strip-debug ${MOTE_ANDROID_LD_EXTRA:-})
LINK_ARG="-C link-arg=-Wl,$(IFS=,; echo "${COMMON_LD[*]}" | tr ' ' ',')"

TRIPLE_ENV=$(tr 'a-z-' 'A-Z_' <<<"$TARGET")
ENVS=(RUSTC_BOOTSTRAP=1 "CARGO_TARGET_DIR=$TRIXIE_TARGET")
PROFILE_ENV=$(echo "$PROFILE" | tr 'a-z-' 'A-Z_')
if [ -n "${MOTE_ANDROID_OPT_LEVEL:-}" ]; then
  case $MOTE_ANDROID_OPT_LEVEL in 0|1|2|3|s|z) ;; *) die "MOTE_ANDROID_OPT_LEVEL must be 0-3, s or z" ;; esac
  ENVS+=("CARGO_PROFILE_${PROFILE_ENV}_OPT_LEVEL=$MOTE_ANDROID_OPT_LEVEL")
fi
if [ -n "${MOTE_ANDROID_LTO:-}" ]; then
  case $MOTE_ANDROID_LTO in fat|thin|off) ;; *) die "MOTE_ANDROID_LTO must be fat, thin or off" ;; esac
  ENVS+=("CARGO_PROFILE_${PROFILE_ENV}_LTO=$MOTE_ANDROID_LTO")
fi
[ -z "${MOTE_ANDROID_RUSTFLAGS:-}" ] || ENVS+=("RUSTFLAGS=$MOTE_ANDROID_RUSTFLAGS")

if [ -n "${ANDROID_NDK_HOME:-}" ]; then
  NDK=$(cd "$ANDROID_NDK_HOME" && pwd -P) || die "ANDROID_NDK_HOME=$ANDROID_NDK_HOME is not a folder"
  CLANG="$NDK/toolchains/llvm/prebuilt/linux-x86_64/bin/$TARGET$API-clang"
  [ -x "$CLANG" ] || die "no $CLANG (ANDROID_NDK_HOME should be an NDK r23+ for Linux x86_64)"
  log "linking with the NDK's clang for API $API ($NDK)"
  # The NDK's clang links its own static libunwind.a: ours is not needed on this route.
  ENVS+=("CARGO_TARGET_${TRIPLE_ENV}_LINKER=$CLANG")
  export MOTE_TRIXIE_BINDS="${MOTE_TRIXIE_BINDS:-} $NDK"
else
  log "no ANDROID_NDK_HOME: linking with ld.lld against generated bionic stubs"
  # The unwinder (see above): a static library built for the same target, linked as -lunwind.
  log "the unwinder (bindings-java/android/unwind) for $TARGET"
  (cd "$ROOT/bindings-java/android/unwind" && "$HERE/in-trixie.sh" env RUSTC_BOOTSTRAP=1 \
    CARGO_TARGET_DIR="$TRIXIE_TARGET/unwind" \
    cargo build --locked --release -Zbuild-std=core,compiler_builtins --target "$TARGET") \
    || die "building the unwinder for $TARGET failed"
  UNWIND_LIB="$TRIXIE_TARGET/unwind/$TARGET/release/libmote_android_unwind.a"
  [ -f "$UNWIND_LIB" ] || die "no $UNWIND_LIB"
  # One wrapper per ABI for both variants: cargo fingerprints the linker's path, and a second
  # path would rebuild the standard library and every dependency at each switch of variant.
  # It lives beside the target folder (in the cache), so that every checkout uses the same
  # path; its text depends on nothing but the ABI (the rest comes in through MOTE_ANDROID_*).
  WRAP="$TRIXIE_TARGET/android-ld/$ABI/ld-wrapper.sh"
  mkdir -p "$(dirname "$WRAP")"
  # The linker rustc calls; runs in the chroot.
  cat >"$WRAP" <<'WRAPPER'
#!/bin/bash
# Generated by scripts/build-android-so.sh: links libmote_java.so against generated bionic stubs.
# rustc calls it as it would call the NDK's clang (the target's default, "gcc" flavor); the
# arguments are turned into ld.lld's: -Wl, lists are split, driver-only flags dropped.
# Environment (set by the script): MOTE_ANDROID_WORK (scratch folder), MOTE_ANDROID_GNU (the
# binutils prefix of the ABI), MOTE_ANDROID_UNWIND (the unwinder archive), MOTE_ANDROID_TABLE
# (bindings-java/android/bionic-api.tsv), MOTE_ANDROID_COLUMN (the ABI's column in it).
set -euo pipefail
args=() out=""
while [ $# -gt 0 ]; do
  a=$1; shift
  case "$a" in
    -Wl,*) IFS=, read -r -a parts <<<"${a#-Wl,}"; args+=("${parts[@]}") ;;
    -o) out=$1; args+=(-o "$1"); shift ;;
    -nodefaultlibs | -nostartfiles | -nostdlib | -fuse-ld=* | -B* | -m64 | -fPIC | -pie | -no-pie) ;;
    -l*)
      case "${a#-l}" in
        c | m | dl | log) args+=("$a") ;;
        # std's unwind crate asks for libunwind: the unwinder archive, as libunwind.a.
        unwind) args+=("$a") ;;
        *) echo "ld-wrapper: unexpected library $a (only bionic's libc, libm, libdl, liblog)" >&2; exit 1 ;;
      esac ;;
    -*) case "$a" in -L* | -shared | -s | --* | -z) args+=("$a") ;;
          *) echo "ld-wrapper: unexpected driver flag $a" >&2; exit 1 ;; esac ;;
    *) args+=("$a") ;;
  esac
done
case "$out" in
  */libmote_java.so) ;;
  *) echo "ld-wrapper: unexpected link of '$out'" >&2; exit 1 ;;
esac
W=$MOTE_ANDROID_WORK
G=$MOTE_ANDROID_GNU
rm -rf "$W"; mkdir -p "$W/empty" "$W/stubs"
printf '%s\n' "${args[@]}" >"$W.args"
: | "$G-as" -o "$W/empty.o"
cp "$MOTE_ANDROID_UNWIND" "$W/empty/libunwind.a"
cp "$MOTE_ANDROID_UNWIND" "$W/stubs/libunwind.a"
# Pass 1: empty stubs (SONAME only) satisfy -lc -lm -ldl -llog; a shared object may keep
# undefined symbols, so this shows everything the library imports.
for l in c m dl log; do
  ld.lld -shared -soname "lib$l.so" -o "$W/empty/lib$l.so" "$W/empty.o"
done
ld.lld "${args[@]}" -L "$W/empty" -o "$W/pass1.so"
# name, binding (GLOBAL/WEAK) of every undefined dynamic symbol
"$G-readelf" --dyn-syms -W "$W/pass1.so" |
  awk '$1 ~ /^[0-9]+:$/ && $7 == "UND" && $8 != "" { sub(/@.*/, "", $8); print $8, $5 }' | sort -u >"$W/imports.txt"
# Which bionic library defines each import, from bionic's own symbol maps (the table); an
# import bionic does not offer apps fails the link here.
for l in c m dl log; do : >"$W/lib$l.txt"; done
unknown=""
while read -r sym bind; do
  l=$(awk -F'\t' -v s="$sym" -v c="$MOTE_ANDROID_COLUMN" '$2 == s && $c != "-" { sub(/^lib/, "", $1); sub(/\.so$/, "", $1); print $1; exit }' "$MOTE_ANDROID_TABLE")
  if [ -z "$l" ]; then unknown="$unknown $sym"; continue; fi
  echo "$sym $bind" >>"$W/lib$l.txt"
done <"$W/imports.txt"
if [ -n "$unknown" ]; then
  echo "ld-wrapper: imports that no Android system library offers apps (bionic-api.tsv):$unknown" >&2
  exit 1
fi
# Pass 2: stubs defining exactly those symbols (functions, or objects for the table's `var`
# rows), then the real link with nothing left undefined.
for l in c m dl log; do
  {
    echo ".text"
    while read -r sym bind; do
      awk -F'\t' -v s="$sym" '$2 == s && $4 == "var" { f = 1 } END { exit !f }' "$MOTE_ANDROID_TABLE" && continue
      printf '.globl %s\n.type %s, %%function\n%s:\n  ret\n' "$sym" "$sym" "$sym"
    done <"$W/lib$l.txt"
    echo ".data"
    while read -r sym bind; do
      awk -F'\t' -v s="$sym" '$2 == s && $4 == "var" { f = 1 } END { exit !f }' "$MOTE_ANDROID_TABLE" || continue
      printf '.globl %s\n.type %s, %%object\n.size %s, 8\n.balign 8\n%s:\n  .quad 0\n' "$sym" "$sym" "$sym" "$sym"
    done <"$W/lib$l.txt"
  } >"$W/stubs/lib$l.s"
  "$G-as" -o "$W/stubs/lib$l.o" "$W/stubs/lib$l.s"
  ld.lld -shared -soname "lib$l.so" -o "$W/stubs/lib$l.so" "$W/stubs/lib$l.o"
done
ld.lld "${args[@]}" -L "$W/stubs" --no-undefined
WRAPPER
  chmod +x "$WRAP"
  case "$ABI" in arm64-v8a) column=5 ;; x86_64) column=6 ;; esac
  ENVS+=("CARGO_TARGET_${TRIPLE_ENV}_LINKER=$WRAP"
         "MOTE_ANDROID_WORK=$OUT/link" "MOTE_ANDROID_GNU=$GNU" "MOTE_ANDROID_UNWIND=$UNWIND_LIB"
         "MOTE_ANDROID_TABLE=$ROOT/bindings-java/android/bionic-api.tsv" "MOTE_ANDROID_COLUMN=$column")
fi

dir=$PROFILE; [ "$PROFILE" = dev ] && dir=debug
built="$TRIXIE_TARGET/$TARGET/$dir/libmote_java.so"
# Always relink (a few seconds): cargo does not see changes of the linker wrapper or of the
# stubs, and the import lists below must come from this link.
rm -f "$built" "$TRIXIE_TARGET/$TARGET/$dir/deps/libmote_java.so" "$OUT/link/imports.txt"

log "cargo rustc -p mote-java ${FEATURES[*]} --target $TARGET ($PROFILE) in the trixie chroot"
start=$(date +%s)
# panic_unwind: every JNI entry catches panics (catch_unwind), so panics must unwind.
# The standard library's features are its defaults without `backtrace` (docs/footprint.md):
# a panic is still caught and reported with its message, but std carries no symbolizer
# (about 200 KB; RUST_BACKTRACE is never set in an app). The CPU-feature detection the cpu
# backend relies on (getauxval, /proc) is kept.
STD_FEATURES=panic-unwind,std_detect_file_io,std_detect_dlsym_getauxval
# shellcheck disable=SC2086
"$HERE/in-trixie.sh" env "${ENVS[@]}" \
  cargo rustc --locked -Zbuild-std=std,panic_unwind -Zbuild-std-features=$STD_FEATURES \
    --target "$TARGET" --profile "$PROFILE" \
    -p mote-java "${FEATURES[@]}" --lib --crate-type cdylib -- $LINK_ARG \
  || die "cargo build for $TARGET failed"
[ -f "$built" ] || die "no $built after the build"
cp "$built" "$OUT/libmote_java.so"
log "built in $(( $(date +%s) - start )) s: $(stat -c %s "$OUT/libmote_java.so") bytes"

if [ -z "${ANDROID_NDK_HOME:-}" ]; then
  [ -f "$OUT/link/imports.txt" ] || die "no $OUT/link/imports.txt: the linker wrapper did not run"
  drift=0
  mkdir -p "$LISTS"
  for l in $LIBS; do
    new="$OUT/link/lib$l.txt"
    list="$LISTS/lib$l$LIST_SUFFIX.txt"
    if [ "$SELECTIVE" = 1 ]; then
      # Leaving code out only drops imports, but a build for size (MOTE_ANDROID_OPT_LEVEL)
      # may call a libc function the full build inlines around (`writev` at opt-level s):
      # such an import is accepted when bionic's table has it for this ABI at the minSdk.
      extra=$(comm -13 <(sort "$list") <(sort "$new"))
      while read -r name _; do
        [ -n "$name" ] || continue
        since=$(awk -F'\t' -v lib="lib$l.so" -v s="$name" -v col="$ABI" '
          NR <= 3 && /^# library/ { for (i = 1; i <= NF; i++) if ($i == col) c = i }
          $1 == lib && $2 == s && c { print $c; exit }' "$ROOT/bindings-java/android/bionic-api.tsv")
        if [ -n "$since" ] && [ "$since" != - ] && [ "$since" -le "$API" ]; then
          log "lib$l.so: $name is not in ${list#"$ROOT"/} but bionic has it on $ABI since API $since (minSdk $API)"
        else
          log "lib$l.so imports $name, beyond ${list#"$ROOT"/} and not in bionic's table for $ABI at API $API"
          drift=1
        fi
      done <<<"$extra"
    elif [ "${MOTE_ANDROID_UPDATE_STUBS:-}" = 1 ]; then
      cp "$new" "$list"
    elif ! diff -u "$list" "$new" >&2; then
      drift=1
    fi
  done
  [ "$drift" = 0 ] || die "the library's imports from Android changed (diff above: checked-in list ${LISTS#"$ROOT"/}/lib*$LIST_SUFFIX.txt vs this build). Check each new symbol exists in bionic at the minSdk in bindings-java/README.md, then rerun with MOTE_ANDROID_UPDATE_STUBS=1 (scripts/build-android-so.sh ${LIST_SUFFIX:+--rpc }$ABI) and commit bindings-java/android/stubs/"
  log "imports (lib*$LIST_SUFFIX.txt): $(for l in $LIBS; do printf 'lib%s.so %s  ' "$l" "$(wc -l <"$LISTS/lib$l$LIST_SUFFIX.txt")"; done)"
fi
printf '%s\n' "$OUT/libmote_java.so"
