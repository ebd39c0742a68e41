#!/usr/bin/env bash
# Build Mote's static libraries for Apple platforms and assemble Mote.xcframework and
# MoteRPC.xcframework, without Xcode.
#
#   scripts/build-xcframework.sh [--check-only]
#
# Two routes, one script; they differ only in the small functions under "Routes" below.
# - Linux (what CI runs): everything Apple-specific runs in the trixie chroot
#   (scripts/in-trixie.sh, root): trixie's Rust 1.85 builds the standard library from source
#   (-Zbuild-std, RUSTC_BOOTSTRAP=1), LLVM 19's llvm-nm/llvm-objcopy/llvm-lipo/ld64.lld and
#   Swift 6.0.3 do the rest.
# - macOS (uname Darwin; never run so far): the host's rustup toolchain with its prebuilt
#   standard libraries, no root, no chroot. Prerequisites, checked but never installed here:
#     rustup target add aarch64-apple-ios aarch64-apple-ios-sim x86_64-apple-ios aarch64-apple-darwin
#     rustup component add llvm-tools     (llvm-nm and llvm-objcopy)
#   plus Xcode with the iOS SDK (rustc links mote-ffi's unused cdylib for every target; lipo,
#   ld and swiftc come with it) and python3 (Xcode's command-line tools have it).
#
# Two frameworks, built, assembled and checked alike (docs/swiftpm.md, "Two products"; the
# FRAMEWORKS table below): Mote.xcframework from mote-swift (the inference library, the Swift
# product `Mote`: no RPC server in it) and MoteRPC.xcframework from mote-swift-rpc (the RPC
# server for an RPC app, the product `MoteRPC`). An app links one of them, never both. Each
# step below runs for both; names given for Mote (libmote.a, Headers/Mote/, moteFFI.h) are, for
# MoteRPC, libmote_rpc.a, Headers/MoteRPC/ and mote_rpcFFI.h.
#
# 1. Builds the static library of each crate (with its c-abi feature: the uniffi bridge
#    and the C ABI in one library) in the `mobile` profile (release with one codegen unit) for
#    aarch64-apple-ios, aarch64-apple-ios-sim, x86_64-apple-ios (the simulator on Intel Macs;
#    without the cpu backend's avx512 level, which Rust 1.85 cannot build) and
#    aarch64-apple-darwin, printing each one's build time; two builds at a time
#    (MOTE_XCFRAMEWORK_JOBS), each lane of triples in a cargo folder of its own under
#    $MOTE_CACHE/target-apple, kept between runs (cargo decides what is stale), because building
#    the standard library four times is the expensive part; runs that share it take turns
#    (flock on $MOTE_CACHE/target-apple.lock, where flock exists). Deployment targets: iOS
#    14.0 and macOS 11.0, the first releases with BNNS's filter API that the bnns backend uses
#    (docs/bnns.md). Also builds scripts/apple/second-rust (a tiny Rust static library of ours)
#    for aarch64-apple-ios, for the link check below.
# 2. Renames the Rust runtime in every archive (docs/apple.md, "Two Rust static libraries in one
#    app"): each defined external symbol outside Mote's public surface (_mote_, _TVMFFI,
#    _TVMBackend, _uniffi_mote_swift, _ffi_mote_swift) becomes _MoteRT + its name, definitions
#    and references alike (llvm-objcopy --redefine-syms, which also rewrites the archive index),
#    so that the std, allocator shim, panic runtime and compiler-builtins of another Rust static
#    library in the same app no longer collide with Mote's (MoteRPC's public surface is
#    _uniffi_mote_swift_rpc and _ffi_mote_swift_rpc instead of mote-swift's). The map per
#    framework and target, sorted, is kept in target/apple/symbol-maps/<framework>/<triple>.txt
#    (a crash log's `_MoteRT__ZN...` is `__ZN...`).
# 3. Writes target/apple/Mote.xcframework: Info.plist (written here with Python's plistlib on
#    both routes, never by xcodebuild -create-xcframework: one code path), one folder per slice
#    (ios-arm64, ios-arm64_x86_64-simulator: a fat archive of arm64 and x86_64 made with
#    lipo -create, macos-arm64) with libmote.a and Headers/Mote/: mote.h (the C ABI, module
#    MoteC), moteFFI.h (the uniffi bridge, module moteFFI) and one module map for both; nothing
#    else directly in Headers/, so that the headers of two frameworks copied into one include
#    folder do not overwrite each other. Zips it deterministically to
#    target/apple/Mote.xcframework.zip with the SHA-256 that SwiftPM's binary target wants
#    (`swift package compute-checksum` is the SHA-256 of the zip) in Mote.xcframework.zip.sha256,
#    and copies the framework to bindings-swift/Mote.xcframework (Package.swift's binary target).
#    No privacy manifest in the framework: Apple wants PrivacyInfo.xcprivacy in the bundle that
#    ships the code, and the Swift package carries it as a resource of its target.
# 4. Checks (also alone with --check-only, on an existing target/apple):
#    - the Info.plist read back: three slices, identifiers, platforms, the simulator variant,
#      architectures (arm64; arm64 and x86_64 for the simulator), libmote.a, Headers;
#    - the zip's SHA-256 against the .sha256 file;
#    - per slice, Headers/ holds only Mote/, and Mote/ exactly mote.h, moteFFI.h and
#      module.modulemap;
#    - per slice, scripts/lib/macho_check.py, for every architecture of the (fat or thin)
#      archive: every object a 64-bit Mach-O of that CPU type with the slice's platform and
#      minimum OS in LC_BUILD_VERSION; the C ABI, the uniffi scaffolding (every function
#      moteFFI.h declares), the error symbol, the kernel services and the system-library
#      registration exported, and the exported mote_/TVMFFI/TVMBackend symbols exactly
#      ffi/abi/symbols.txt (the C ABI baseline scripts/test-ffi.sh checks libmote.so against);
#      BNNS referenced (so the Accelerate framework must be linked: Package.swift says so);
#    - per slice, the renaming: no exported symbol outside the public prefixes and _MoteRT, no
#      undefined reference left to a renamed name (on cargo's unrenamed archive the first fails:
#      3655 symbols outside on aarch64-apple-ios, 2026-11-27);
#    - per slice, no test hook (no symbol naming `for_test`: built without mote-swift's
#      `test-hooks` feature);
#    - per slice, the RPC server where it belongs: no symbol of the mote_rpc crate (Rust's
#      mangled `8mote_rpc`) or of NativeRpcServer in Mote.xcframework, some in MoteRPC's;
#    - per slice, `swiftc -typecheck -I <slice>/Headers` of a file that imports MoteC and moteFFI
#      (mote_rpcFFI) and names a declaration of each: Swift finds both module maps in
#      Headers/Mote/ (Headers/MoteRPC/);
#    - the ios-arm64 archive and second-rust's linked into one dylib by ld64.lld -all_load
#      (every member; -undefined dynamic_lookup because there is no SDK and no libSystem here):
#      links without a duplicate symbol, while cargo's unrenamed archive does not (the duplicate
#      symbols are counted: 1600 on 2026-11-27), and the dylib exports _mote_model_load and
#      _second_rust_probe; linked by need instead (no -all_load, as an app's linker does by
#      default) the dylib holds both runtimes, _MoteRT___rust_alloc beside ___rust_alloc.
#      (Cargo's unrenamed archive links by need too, silently: one runtime for both libraries.)
#
# Ends with "xcframework checks: N passed, M failed" (non-zero exit on a failure). Nothing here
# runs the library, and Apple's linker and Xcode were never used on the output: there is no
# Apple SDK on this machine (README, "Apple"; docs/apple.md).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
ROOT=$(git -C "$HERE" rev-parse --show-toplevel 2>/dev/null || (cd "$HERE/.." && pwd -P))
cd "$ROOT"
export MOTE_CACHE=${MOTE_CACHE:-$HOME/.cache/mote}
mkdir -p "$MOTE_CACHE"
MOTE_CACHE=$(cd "$MOTE_CACHE" && pwd -P)

# The frameworks: name | crate whose static library is its binary | that library's file name in
# the framework | the uniffi module (its header <module>.h and module map are the crate's
# generated ones, in bindings-swift/Sources/<C target>/include) | that C target | uniffi
# exports (after `<crate>_fn_`) the Mach-O check requires beside the common ones.
FRAMEWORKS=(
  "Mote|mote-swift|libmote.a|moteFFI|MoteFFI|constructor_nativemodel_load constructor_nativemodel_from_system_lib"
  "MoteRPC|mote-swift-rpc|libmote_rpc.a|mote_rpcFFI|MoteRPCFFI|constructor_nativerpcserver_start func_system_lib_prefixes"
)
FEATURES=${MOTE_XCFRAMEWORK_FEATURES:-c-abi}
PROFILE=mobile
IOS_MIN=14.0
MACOS_MIN=11.0
OUT=$ROOT/target/apple
TARGET_DIR=$MOTE_CACHE/target-apple
# The builds run in JOBS lanes at once, lane i building TRIPLES i, i + JOBS, ...: each build is
# mostly one crate compiled as one codegen unit, which keeps one core busy. A lane has a cargo
# folder of its own, $TARGET_DIR/laneI (cargo holds a folder's lock for a whole build).
JOBS=${MOTE_XCFRAMEWORK_JOBS:-2}
case $JOBS in [1-9]) ;; *) echo "build-xcframework: MOTE_XCFRAMEWORK_JOBS must be 1 to 9" >&2; exit 1 ;; esac
# The second Rust static library of the link check, and the target both are linked for.
SECOND=$HERE/apple/second-rust
LINK_TRIPLE=aarch64-apple-ios
LINK=$OUT/link-test

# Each framework's public surface, as C names, is PUBLIC (select_framework): what apps and the
# Swift package call. Everything else the archive defines is renamed to $RENAMED + its Mach-O
# name.
RENAMED=MoteRT

# slice id | rust targets (one per architecture, in the order of the next field) |
# architectures | platform for macho_check | minimum OS
SLICES=(
  "ios-arm64|aarch64-apple-ios|arm64|ios|$IOS_MIN"
  "ios-arm64_x86_64-simulator|aarch64-apple-ios-sim x86_64-apple-ios|arm64,x86_64|ios-simulator|$IOS_MIN"
  "macos-arm64|aarch64-apple-darwin|arm64|macos|$MACOS_MIN"
)
TRIPLES=(aarch64-apple-ios aarch64-apple-ios-sim x86_64-apple-ios aarch64-apple-darwin)

# lane TRIPLE: the build lane of TRIPLE (its index in TRIPLES modulo JOBS).
lane() {
  local i
  for i in "${!TRIPLES[@]}"; do
    if [ "${TRIPLES[$i]}" = "$1" ]; then echo $((i % JOBS)); return; fi
  done
  echo "build-xcframework: no triple $1" >&2
  exit 1
}

# tdir TRIPLE: the cargo folder TRIPLE builds in.
tdir() { echo "$TARGET_DIR/lane$(lane "$1")"; }

PY=${MOTE_PYTHON:-python3}

# ---------------------------------------------------------------------------------------------
# Routes: the only places where Linux (trixie chroot) and macOS (host rustup) differ.

if [ "$(uname -s)" = Darwin ]; then ROUTE=mac; else ROUTE=chroot; fi

# run CMD [ARGS...]: a build tool, in the chroot on Linux, directly on macOS. Paths given to it
# are the same inside and outside (in-trixie.sh binds the project, $MOTE_CACHE and /tmp).
run() {
  if [ "$ROUTE" = chroot ]; then "$HERE/in-trixie.sh" "$@"; else "$@"; fi
}

# Sets NM, OBJCOPY, LIPO, SWIFTC and LD64 (an array: the linker and its own flags), after
# checking the route's prerequisites; never installs anything.
setup_tools() {
  if [ "$ROUTE" = chroot ]; then
    "$HERE/trixie.sh" >/dev/null
    NM=llvm-nm-19 OBJCOPY=llvm-objcopy-19 LIPO=llvm-lipo-19 SWIFTC=swiftc
    # lld stops after 20 errors unless told otherwise: the unrenamed link's count wants them all.
    LD64=(ld64.lld-19 --error-limit=0)
    return
  fi
  local t installed missing="" host bin
  for t in rustup rustc cargo "$PY"; do
    command -v "$t" >/dev/null || { echo "build-xcframework: $t not found (rustup: https://rustup.rs)" >&2; exit 1; }
  done
  installed=$(rustup target list --installed)
  for t in "${TRIPLES[@]}"; do
    grep -qx "$t" <<<"$installed" || missing="$missing $t"
  done
  if [ -n "$missing" ]; then
    echo "build-xcframework: Rust targets missing; run: rustup target add$missing" >&2
    exit 1
  fi
  host=$(rustc -vV | sed -n 's/^host: //p')
  bin="$(rustc --print sysroot)/lib/rustlib/$host/bin"
  NM=$bin/llvm-nm OBJCOPY=$bin/llvm-objcopy
  if [ ! -x "$NM" ] || [ ! -x "$OBJCOPY" ]; then
    echo "build-xcframework: no llvm-nm/llvm-objcopy in $bin; run: rustup component add llvm-tools" >&2
    exit 1
  fi
  if command -v lipo >/dev/null; then LIPO=lipo
  elif [ -x "$bin/llvm-lipo" ]; then LIPO=$bin/llvm-lipo
  else echo "build-xcframework: no lipo; install Xcode's command-line tools (xcode-select --install)" >&2; exit 1
  fi
  command -v swiftc >/dev/null || { echo "build-xcframework: no swiftc; install Xcode" >&2; exit 1; }
  SWIFTC=swiftc
  # LLVM's ld64.lld when installed (the linker the Linux route uses), else Apple's ld.
  if command -v ld64.lld >/dev/null; then LD64=(ld64.lld --error-limit=0); else LD64=(ld); fi
}

# cargo_apple TRIPLE CARGO-ARGS...: cargo for an Apple target with the deployment targets set.
cargo_apple() {
  local triple=$1 v
  shift
  if [ "$ROUTE" = mac ]; then
    env CARGO_TARGET_DIR="$(tdir "$triple")" \
      IPHONEOS_DEPLOYMENT_TARGET=$IOS_MIN MACOSX_DEPLOYMENT_TARGET=$MACOS_MIN \
      cargo "$@" --target "$triple" >&2
    return
  fi
  # Cargo builds every crate type a dependency declares, so mote-ffi's cdylib is linked too
  # (nothing uses it: its code is in the static library through the rlib). That link needs
  # Apple's SDK and linker, which are not here: rustc gets an empty folder as SDKROOT and
  # `true` as the linker, so the unused dylib is simply not written. The static library
  # itself is never linked. The standard library is built from source without its `backtrace`
  # feature, as for Android (docs/footprint.md): panics are still caught and reported.
  v=$(echo "$triple" | tr 'a-z-' 'A-Z_')
  mkdir -p "$TARGET_DIR/no-sdk"
  run env RUSTC_BOOTSTRAP=1 CARGO_TARGET_DIR="$(tdir "$triple")" \
    SDKROOT="$TARGET_DIR/no-sdk" "CARGO_TARGET_${v}_LINKER=true" \
    IPHONEOS_DEPLOYMENT_TARGET=$IOS_MIN MACOSX_DEPLOYMENT_TARGET=$MACOS_MIN \
    cargo "$@" -Zbuild-std=std,panic_abort \
    -Zbuild-std-features=panic-unwind,std_detect_file_io,std_detect_dlsym_getauxval \
    --target "$triple" >&2
}

# ---------------------------------------------------------------------------------------------
# Shared steps.

# select_framework NAME: the globals of one framework of FRAMEWORKS: NAME, CRATE, LIBFILE
# (cargo's archive), FWLIB (the framework's), FFI_MOD, FFI_DIR, EXTRA_EXPORTS, CRATE_SYM (the
# crate as a symbol), PUBLIC (the public prefixes), FW (target/apple/NAME.xcframework), ZIP,
# MAPS (the symbol maps), LINKDIR (the link check's files) and PKG_FW (the copy inside the
# package that Package.swift's local binary target names: SwiftPM wants it in the package).
select_framework() {
  local f extra
  for f in "${FRAMEWORKS[@]}"; do
    IFS='|' read -r NAME CRATE FWLIB FFI_MOD FFI_DIR extra <<<"$f"
    [ "$NAME" = "$1" ] || continue
    CRATE_SYM=${CRATE//-/_}
    LIBFILE=lib$CRATE_SYM.a
    read -r -a EXTRA_EXPORTS <<<"$extra"
    PUBLIC=(mote_ TVMFFI TVMBackend "uniffi_$CRATE_SYM" "ffi_$CRATE_SYM")
    FW=$OUT/$NAME.xcframework
    ZIP=$OUT/$NAME.xcframework.zip
    MAPS=$OUT/symbol-maps/$NAME
    LINKDIR=$LINK/$NAME
    PKG_FW=$ROOT/bindings-swift/$NAME.xcframework
    return 0
  done
  echo "build-xcframework: no framework $1" >&2
  exit 1
}
FRAMEWORK_NAMES=()
for f in "${FRAMEWORKS[@]}"; do FRAMEWORK_NAMES+=("${f%%|*}"); done

# build_mote TRIPLE: the selected framework's static library, $(tdir TRIPLE)/TRIPLE/$PROFILE/$LIBFILE.
build_mote() {
  local features=(--features "$FEATURES")
  # x86_64 only runs in the simulator (development on Intel Macs): without the avx512 level,
  # which Rust 1.85 cannot build (runtime/Cargo.toml); the same on both routes.
  case $1 in x86_64-*) features=(--no-default-features --features cpu-backend,opencl "${features[@]}") ;; esac
  cargo_apple "$1" rustc --locked --profile "$PROFILE" -p "$CRATE" "${features[@]}" \
    --lib --crate-type staticlib
}

# rename_runtime IN.a MAP OUT.a: writes the sorted map (old name, new name) of every defined
# external symbol outside the public surface, then OUT.a with those names replaced everywhere.
rename_runtime() {
  local keep
  keep="^_($(IFS='|'; echo "${PUBLIC[*]}"))"
  # -j prints one name a line, and a "file(member):" line before each member's names; members
  # without symbols make llvm-nm say so on stderr, which is kept out of the log unless it fails.
  if ! run "$NM" --defined-only --extern-only -j "$1" >"$2.names" 2>"$2.err"; then
    cat "$2.err" >&2
    exit 1
  fi
  awk -v keep="$keep" -v p="_$RENAMED" 'NF == 1 && $1 !~ /:$/ && $1 !~ keep { print $1, p $1 }' \
    "$2.names" | LC_ALL=C sort -u >"$2"
  rm -f "$2.names" "$2.err"
  run "$OBJCOPY" --redefine-syms="$2" "$1" "$3"
}

# link_pair all|lazy MOTE.a OUT.dylib LOG: links MOTE.a and second-rust's archive into one
# dylib for arm64 iOS; the linker's exit status. `all`: -all_load, every member of both archives
# (the strictest case, as with -all_load or -force_load in an app). `lazy`: members only as
# they are needed, from Mote's and second-rust's entry points, as an app's linker takes them by
# default. -undefined dynamic_lookup leaves the system's functions unresolved, as there is no
# SDK (no libSystem, no Accelerate) here.
link_pair() {
  local load=(-all_load)
  [ "$1" = all ] || load=(-u _mote_model_load -u _second_rust_probe)
  run "${LD64[@]}" -arch arm64 -platform_version ios "$IOS_MIN" "$IOS_MIN" -dylib \
    -undefined dynamic_lookup "${load[@]}" -o "$3" "$2" "$LINK/libsecond.a" >"$4" 2>&1
}

# duplicates LOG: the distinct names of the duplicate symbols a link reported, one a line
# (ld64.lld: "duplicate symbol: NAME"; Apple's ld: "duplicate symbol 'NAME' in:").
duplicates() {
  sed -n -e 's/.*duplicate symbol: \([^ ]*\).*/\1/p' -e "s/.*duplicate symbol '\\([^']*\\)'.*/\\1/p" "$1" |
    LC_ALL=C sort -u
}

# listing DIR: the names in DIR, dot files too, sorted and each followed by a space; nothing
# when there is no DIR.
listing() {
  [ -d "$1" ] || return 0
  (cd "$1" && find . -mindepth 1 -maxdepth 1 | sed 's|^\./||' | LC_ALL=C sort | tr '\n' ' ')
}

setup_tools

# One run at a time per cargo target folder: runs from other checkouts (CI's clone on the same
# machine) share $TARGET_DIR, and each run renames the archive cargo left there after its own
# build. flock is util-linux's (not on macOS, where the folder is the developer's own).
if command -v flock >/dev/null; then
  exec 9>"$TARGET_DIR.lock"
  if ! flock -n 9; then
    echo "build-xcframework: waiting for another run holding $TARGET_DIR.lock" >&2
    flock 9
  fi
fi

# build_lane N: the libraries of lane N's triples, and second-rust in LINK_TRIPLE's lane.
build_lane() {
  local triple name start
  for triple in "${TRIPLES[@]}"; do
    [ "$(lane "$triple")" = "$1" ] || continue
    for name in "${FRAMEWORK_NAMES[@]}"; do
      select_framework "$name"
      echo "=== build-xcframework: $CRATE for $triple ===" >&2
      start=$(date +%s)
      build_mote "$triple"
      echo "build-xcframework: $CRATE for $triple built in $(( $(date +%s) - start )) s" >&2
    done
  done
  [ "$(lane "$LINK_TRIPLE")" = "$1" ] || return 0
  echo "=== build-xcframework: second-rust for $LINK_TRIPLE ===" >&2
  start=$(date +%s)
  cargo_apple "$LINK_TRIPLE" build --locked --manifest-path "$SECOND/Cargo.toml" --profile "$PROFILE"
  echo "build-xcframework: second-rust built in $(( $(date +%s) - start )) s" >&2
}

if [ "${1:-}" != "--check-only" ]; then
  mkdir -p "$OUT"
  start=$(date +%s)
  pids=()
  for ((l = 0; l < JOBS; l++)); do
    build_lane "$l" >"$OUT/lane$l.log" 2>&1 &
    pids+=($!)
  done
  failed_lanes=0
  # Each lane's log once it ends, in lane order (the lanes' output would interleave).
  for ((l = 0; l < JOBS; l++)); do
    if ! wait "${pids[$l]}"; then failed_lanes=1; fi
    cat "$OUT/lane$l.log" >&2
  done
  [ "$failed_lanes" = 0 ] || { echo "build-xcframework: a build failed (logs above)" >&2; exit 1; }
  echo "build-xcframework: every library built in $(( $(date +%s) - start )) s, $JOBS at a time" >&2

  rm -rf "$OUT/renamed" "$OUT/symbol-maps" "$LINK"
  mkdir -p "$LINK"
  cp "$(tdir "$LINK_TRIPLE")/$LINK_TRIPLE/$PROFILE/libsecond_rust.a" "$LINK/libsecond.a"
  for name in "${FRAMEWORK_NAMES[@]}"; do
    select_framework "$name"
    rm -rf "$FW" "$ZIP" "$ZIP.sha256"
    mkdir -p "$FW" "$MAPS" "$LINKDIR"
    for triple in "${TRIPLES[@]}"; do
      mkdir -p "$OUT/renamed/$NAME/$triple"
      rename_runtime "$(tdir "$triple")/$triple/$PROFILE/$LIBFILE" "$MAPS/$triple.txt" \
        "$OUT/renamed/$NAME/$triple/$FWLIB"
      echo "build-xcframework: $NAME, $triple: $(wc -l <"$MAPS/$triple.txt" | tr -d ' ') symbols renamed to _$RENAMED..." >&2
    done
    # The link check's input: cargo's archive as it was before the renaming.
    cp "$(tdir "$LINK_TRIPLE")/$LINK_TRIPLE/$PROFILE/$LIBFILE" "$LINKDIR/unrenamed.a"

    for s in "${SLICES[@]}"; do
      IFS='|' read -r id triples _archs _platform _min <<<"$s"
      mkdir -p "$FW/$id/Headers/$NAME"
      read -r -a ts <<<"$triples"
      if [ "${#ts[@]}" -eq 1 ]; then
        cp "$OUT/renamed/$NAME/${ts[0]}/$FWLIB" "$FW/$id/$FWLIB"
      else
        inputs=()
        for t in "${ts[@]}"; do inputs+=("$OUT/renamed/$NAME/$t/$FWLIB"); done
        run "$LIPO" -create "${inputs[@]}" -output "$FW/$id/$FWLIB"
      fi
      cp ffi/include/mote.h "$FW/$id/Headers/$NAME/mote.h"
      cp "bindings-swift/Sources/$FFI_DIR/include/$FFI_MOD.h" "$FW/$id/Headers/$NAME/$FFI_MOD.h"
      # Two modules: the C ABI for C/Objective-C/Swift callers, and the uniffi bridge that
      # the Swift package's generated code imports (its module map, as generated).
      { printf 'module MoteC {\n    header "mote.h"\n    export *\n}\n'
        cat "bindings-swift/Sources/$FFI_DIR/include/module.modulemap"; echo; } >"$FW/$id/Headers/$NAME/module.modulemap"
    done

    # Info.plist from SLICES ("id|triples|archs|platform|min"), then the zip and its checksum.
    "$PY" - "$FW" "$ZIP" "$FWLIB" "${SLICES[@]}" <<'EOF'
import hashlib, os, plistlib, sys, zipfile
fw, zip_path, lib, slices = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
libs = []
for s in slices:
    ident, _triples, archs, platform, _min = s.split("|")
    entry = {"BinaryPath": lib, "HeadersPath": "Headers", "LibraryIdentifier": ident,
             "LibraryPath": lib, "SupportedArchitectures": archs.split(","),
             "SupportedPlatform": "macos" if platform == "macos" else "ios"}
    if platform == "ios-simulator":
        entry["SupportedPlatformVariant"] = "simulator"
    libs.append(entry)
info = {"AvailableLibraries": libs, "CFBundlePackageType": "XFWK", "XCFrameworkFormatVersion": "1.0"}
with open(os.path.join(fw, "Info.plist"), "wb") as f:
    plistlib.dump(info, f, fmt=plistlib.FMT_XML, sort_keys=True)
# Deterministic zip: sorted names, fixed timestamps and permissions, so the checksum only
# changes when the contents do.
base = os.path.dirname(fw)
names = []
for d, _dirs, files in os.walk(fw):
    for n in files:
        names.append(os.path.relpath(os.path.join(d, n), base))
with zipfile.ZipFile(zip_path, "w", zipfile.ZIP_DEFLATED) as z:
    for n in sorted(names):
        zi = zipfile.ZipInfo(n, date_time=(1980, 1, 1, 0, 0, 0))
        zi.external_attr = 0o644 << 16
        zi.compress_type = zipfile.ZIP_DEFLATED
        with open(os.path.join(base, n), "rb") as f:
            z.writestr(zi, f.read())
with open(zip_path, "rb") as f:
    digest = hashlib.sha256(f.read()).hexdigest()
with open(zip_path + ".sha256", "w") as f:
    f.write(digest + "\n")
print(f"build-xcframework: {zip_path} ({os.path.getsize(zip_path)} bytes) sha256 {digest}", file=sys.stderr)
EOF
    rm -rf "$PKG_FW" && cp -R "$FW" "$PKG_FW"
  done
  rm -rf "$OUT/renamed"
fi

passed=0
failed=0
ok() { echo "ok   $*"; passed=$((passed + 1)); }
bad() { echo "FAIL $*"; failed=$((failed + 1)); }
ld_name=$(basename "${LD64[0]}")
mkdir -p "$OUT/checks"

for name in "${FRAMEWORK_NAMES[@]}"; do
select_framework "$name"
zipname=$(basename "$ZIP")

# The Info.plist read back: three slices, the identifiers, platforms, variant and architectures.
if "$PY" - "$FW/Info.plist" "$FWLIB" <<'EOF'
import plistlib, sys
info = plistlib.load(open(sys.argv[1], "rb"))
lib = sys.argv[2]
assert info["CFBundlePackageType"] == "XFWK" and info["XCFrameworkFormatVersion"] == "1.0"
got = sorted((l["LibraryIdentifier"], l["SupportedPlatform"], l.get("SupportedPlatformVariant"),
              tuple(l["SupportedArchitectures"]), l["LibraryPath"], l["BinaryPath"], l["HeadersPath"])
             for l in info["AvailableLibraries"])
want = [("ios-arm64", "ios", None, ("arm64",), lib, lib, "Headers"),
        ("ios-arm64_x86_64-simulator", "ios", "simulator", ("arm64", "x86_64"), lib, lib, "Headers"),
        ("macos-arm64", "macos", None, ("arm64",), lib, lib, "Headers")]
assert got == want, got
EOF
then ok "$NAME: Info.plist lists ios-arm64, ios-arm64_x86_64-simulator (arm64, x86_64), macos-arm64 ($FWLIB, Headers)"
else bad "$NAME: Info.plist does not describe the three slices"
fi

zip_sum=$("$PY" -c 'import hashlib, sys; print(hashlib.sha256(open(sys.argv[1], "rb").read()).hexdigest())' \
  "$ZIP" 2>/dev/null || true)
if [ -n "$zip_sum" ] && [ "$zip_sum" = "$(cat "$ZIP.sha256" 2>/dev/null)" ]; then
  ok "$zipname checksum $zip_sum"
else
  bad "$zipname missing or its checksum file does not match"
fi

# The functions the uniffi header declares: what the generated Swift calls, so none may be
# renamed.
grep -oE "(uniffi|ffi)_${CRATE_SYM}_[A-Za-z0-9_]+\\(" "bindings-swift/Sources/$FFI_DIR/include/$FFI_MOD.h" |
  tr -d '(' | LC_ALL=C sort -u >"$OUT/checks/$FFI_MOD-functions.txt"
# A Swift file naming one declaration of each module (mote.h's mote_version, the uniffi
# header's RustBuffer and a uniffi constructor).
ctor="uniffi_${CRATE_SYM}_fn_${EXTRA_EXPORTS[0]}"
cat >"$OUT/checks/imports-$NAME.swift" <<EOF
import MoteC
import $FFI_MOD

let version: UnsafePointer<CChar>? = mote_version()
let buffer = RustBuffer(capacity: 0, len: 0, data: nil)
let constructor = $ctor
EOF
public_list=$(IFS=,; echo "${PUBLIC[*]}")
extra_requires=()
for e in "${EXTRA_EXPORTS[@]}"; do extra_requires+=(--require "uniffi_${CRATE_SYM}_fn_$e"); done

for s in "${SLICES[@]}"; do
  IFS='|' read -r id _triples archs platform min <<<"$s"
  # Headers/ holds the one folder NAME/, and NAME/ the two headers and the module map.
  hdrs=$(listing "$FW/$id/Headers")
  mote=$(listing "$FW/$id/Headers/$NAME")
  if [ "$hdrs" = "$NAME " ] && [ "$mote" = "module.modulemap mote.h $FFI_MOD.h " ] &&
     [ -s "$FW/$id/Headers/$NAME/mote.h" ] && [ -s "$FW/$id/Headers/$NAME/$FFI_MOD.h" ]; then
    ok "$NAME $id: Headers/ holds only $NAME/ (module.modulemap, mote.h, $FFI_MOD.h)"
  else
    bad "$NAME $id: Headers/ holds '${hdrs% }', Headers/$NAME/ '${mote% }' (want $NAME; module.modulemap mote.h $FFI_MOD.h)"
  fi

  log=$(mktemp)
  if "$PY" "$HERE/lib/macho_check.py" "$FW/$id/$FWLIB" --platform "$platform" --minos "$min" \
      --arch "$archs" \
      --require mote_model_load --require mote_session_run --require-prefix mote_ \
      --require TVMFFIErrorSetRaisedFromCStrParts --require TVMFFIEnvModRegisterSystemLibSymbol \
      --require TVMBackendParallelLaunch --require mote_model_from_system_lib --require mote_model_load_with_options \
      "${extra_requires[@]}" \
      --require-prefix "uniffi_${CRATE_SYM}_fn_" --require "ffi_${CRATE_SYM}_uniffi_contract_version" \
      --require-file "$OUT/checks/$FFI_MOD-functions.txt" \
      --require-undefined BNNSFilterCreateLayerConvolution \
      --exports-exactly ffi/abi/symbols.txt >"$log" 2>&1; then
    ok "$NAME $id: $(grep -c '^ok' "$log") Mach-O checks ($(grep -o '^ok   [a-z0-9_]*: [0-9]* Mach-O objects' "$log" | sed 's/^ok   //' | paste -sd, - | sed 's/,/, /g'))"
  else
    bad "$NAME $id: $(grep '^FAIL' "$log" | head -3 | cut -c1-400 | tr '\n' ' ')"
  fi

  if "$PY" "$HERE/lib/macho_check.py" "$FW/$id/$FWLIB" --platform "$platform" --minos "$min" \
      --arch "$archs" --only-exported-prefixes "$public_list" --renamed-prefix "$RENAMED" >"$log" 2>&1; then
    ok "$NAME $id: runtime renamed ($(grep -o 'renamed (_[A-Za-z]*: [0-9]*)' "$log" | sed 's/renamed (_[A-Za-z]*: //; s/)//' | paste -sd/ -) symbols to _$RENAMED, only $public_list exported as is, no undefined reference to a renamed name)"
  else
    bad "$NAME $id: $(grep '^FAIL' "$log" | head -2 | cut -c1-400 | tr '\n' ' ')"
  fi
  rm -f "$log"

  # No test hook in what apps link: mote-swift's `test-hooks` feature is for its own tests
  # (docs/uniffi.md, "Test hooks"). The RPC server only in MoteRPC's: the inference library
  # carries none (issue 30; docs/swiftpm.md, "Two products").
  syms=$(run "$NM" --defined-only -j "$FW/$id/$FWLIB" 2>/dev/null || true)
  hooks=$(grep -c 'for_test' <<<"$syms" || true)
  if [ "$hooks" = 0 ]; then
    ok "$NAME $id: no test hook (no symbol naming for_test)"
  else
    bad "$NAME $id: $hooks symbols of test hooks (built with mote-swift's test-hooks feature?)"
  fi
  rpc=$(grep -ci -e '8mote_rpc' -e 'nativerpcserver' <<<"$syms" || true)
  if [ "$NAME" = MoteRPC ]; then
    if [ "$rpc" -gt 0 ]; then ok "$NAME $id: the RPC server is in ($rpc symbols of mote_rpc or NativeRpcServer)"
    else bad "$NAME $id: no symbol of mote_rpc or NativeRpcServer: no RPC server"
    fi
  elif [ "$rpc" = 0 ]; then
    ok "$NAME $id: no RPC server (no symbol of mote_rpc or NativeRpcServer)"
  else
    bad "$NAME $id: $rpc symbols of mote_rpc or NativeRpcServer: the RPC server is in the inference library"
  fi

  # Swift's Clang importer finds the module maps in Headers/NAME/ from -I Headers.
  if out=$(run "$SWIFTC" -typecheck -module-cache-path "$OUT/checks/module-cache-$NAME" \
      -I "$FW/$id/Headers" "$OUT/checks/imports-$NAME.swift" 2>&1); then
    ok "$NAME $id: swiftc -typecheck -I Headers imports MoteC (mote_version) and $FFI_MOD (RustBuffer, $ctor)"
  else
    bad "$NAME $id: swiftc -typecheck -I Headers: $(echo "$out" | grep -m2 error | tr '\n' ' ')"
  fi
done

# Two Rust static libraries in one Mach-O: the renamed ios-arm64 archive links beside
# second-rust's; cargo's unrenamed one does not.
lib="$FW/ios-arm64/$FWLIB"
if [ -s "$LINK/libsecond.a" ] && [ -s "$LINKDIR/unrenamed.a" ]; then
  if link_pair all "$lib" "$LINKDIR/renamed.dylib" "$LINKDIR/renamed.log" &&
     [ -z "$(duplicates "$LINKDIR/renamed.log")" ]; then
    ok "$NAME ios-arm64/$FWLIB + second-rust linked by $ld_name -all_load into one dylib: exit 0, no duplicate symbol"
    if exports=$(run "$NM" -g --defined-only -j "$LINKDIR/renamed.dylib") &&
       grep -qx _mote_model_load <<<"$exports" && grep -qx _second_rust_probe <<<"$exports"; then
      ok "$NAME: the linked dylib exports _mote_model_load and _second_rust_probe"
    else
      bad "$NAME: the linked dylib does not export both _mote_model_load and _second_rust_probe"
    fi
  else
    bad "$NAME ios-arm64/$FWLIB + second-rust do not link with -all_load: $(duplicates "$LINKDIR/renamed.log" | grep -c . || true) duplicate symbols; $(grep -m3 -i error "$LINKDIR/renamed.log" | cut -c1-200 | tr '\n' ' ')"
    bad "$NAME: no linked dylib to read the exports of"
  fi
  # Linked by need, both archives' runtimes come in side by side: Mote's under _MoteRT.
  if link_pair lazy "$lib" "$LINKDIR/lazy.dylib" "$LINKDIR/lazy.log" &&
     syms=$(run "$NM" --defined-only -j "$LINKDIR/lazy.dylib") &&
     grep -qx "_${RENAMED}___rust_alloc" <<<"$syms" && grep -qx ___rust_alloc <<<"$syms" &&
     grep -qx _mote_model_load <<<"$syms" && grep -qx _second_rust_probe <<<"$syms"; then
    ok "$NAME ios-arm64/$FWLIB + second-rust linked by need (no -all_load): two runtimes, _${RENAMED}___rust_alloc beside ___rust_alloc"
  else
    bad "$NAME ios-arm64/$FWLIB + second-rust linked by need: no link, or not both _${RENAMED}___rust_alloc and ___rust_alloc: $(grep -m3 -i error "$LINKDIR/lazy.log" | cut -c1-200 | tr '\n' ' ')"
  fi
  if link_pair all "$LINKDIR/unrenamed.a" "$LINKDIR/unrenamed.dylib" "$LINKDIR/unrenamed.log"; then
    bad "$NAME: cargo's unrenamed archive + second-rust linked with -all_load: the duplicate-symbol check proves nothing"
  else
    dups=$(duplicates "$LINKDIR/unrenamed.log")
    n=$(grep -c . <<<"$dups" || true)
    examples=$(grep -x -e ___rust_alloc -e _rust_eh_personality -e ___udivti3 <<<"$dups" | paste -sd, - | sed 's/,/, /g' || true)
    if [ "$n" -gt 0 ]; then
      ok "$NAME: cargo's unrenamed archive + second-rust do not link with -all_load: $n duplicate symbols (${examples:-$(head -2 <<<"$dups" | paste -sd, -)}, ...)"
    else
      bad "$NAME: cargo's unrenamed archive + second-rust failed to link without a duplicate symbol: $(head -3 "$LINKDIR/unrenamed.log" | cut -c1-200 | tr '\n' ' ')"
    fi
  fi
  rm -f "$LINKDIR/renamed.dylib" "$LINKDIR/unrenamed.dylib" "$LINKDIR/lazy.dylib"
else
  bad "$NAME: no link-check inputs ($LINK/libsecond.a, $LINKDIR/unrenamed.a): run without --check-only"
fi
done

echo "xcframework checks: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
