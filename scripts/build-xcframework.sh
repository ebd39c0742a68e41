#!/usr/bin/env bash
# Build Mote's static library for Apple platforms and assemble Mote.xcframework, without Xcode.
#
#   scripts/build-xcframework.sh [--check-only]
#
# 1. In the trixie chroot (scripts/in-trixie.sh), with trixie's Rust 1.85 and -Zbuild-std
#    (RUSTC_BOOTSTRAP=1), builds the static library of $CRATE (mote-swift with its c-abi
#    feature: the uniffi bridge and the C ABI in one library) in the `mobile` profile (release
#    with one codegen unit) for
#    aarch64-apple-ios, aarch64-apple-ios-sim and aarch64-apple-darwin. The cargo target folder
#    is $MOTE_CACHE/target-apple, kept between runs (cargo decides what is stale), because
#    building the standard library three times is the expensive part.
#    Deployment targets: iOS 14.0 and macOS 11.0, the first releases with BNNS's filter API that
#    the bnns backend uses (docs/bnns.md).
# 2. Writes target/apple/Mote.xcframework: Info.plist (written here with Python's plistlib: no
#    xcodebuild on this machine), one folder per slice (ios-arm64, ios-arm64-simulator,
#    macos-arm64) with libmote.a and Headers/: mote.h (the C ABI, module MoteC), moteFFI.h
#    (the uniffi bridge, module moteFFI) and one module map for both.
# 3. Zips it deterministically to target/apple/Mote.xcframework.zip and writes the SHA-256 that
#    SwiftPM's binary target wants (`swift package compute-checksum` is the SHA-256 of the zip)
#    to Mote.xcframework.zip.sha256.
# 4. Checks every slice with scripts/lib/macho_check.py: every object is arm64 Mach-O with the
#    slice's platform and minimum OS in LC_BUILD_VERSION; the C ABI, the uniffi scaffolding,
#    the error symbol, the kernel services and the system-library registration are exported,
#    and the exported mote_/TVMFFI/TVMBackend symbols are exactly ffi/abi/symbols.txt (the
#    C ABI baseline scripts/test-ffi.sh checks libmote.so against); BNNS is referenced (so the Accelerate framework
#    must be linked: Package.swift says so). The Info.plist is read back and compared.
#
# --check-only: skip steps 1-3 and check an existing target/apple.
# Ends with "xcframework checks: N passed, M failed". Nothing here links or runs the library:
# there is no Apple SDK on this machine (README, "Apple").
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
ROOT=$(git -C "$HERE" rev-parse --show-toplevel 2>/dev/null || (cd "$HERE/.." && pwd -P))
cd "$ROOT"
export MOTE_CACHE=${MOTE_CACHE:-$HOME/.cache/mote}
mkdir -p "$MOTE_CACHE"
MOTE_CACHE=$(cd "$MOTE_CACHE" && pwd -P)

# The crate whose static library is the framework's binary, and its library file name.
CRATE=${MOTE_XCFRAMEWORK_CRATE:-mote-swift}
FEATURES=${MOTE_XCFRAMEWORK_FEATURES:-c-abi}
LIBFILE=lib${CRATE//-/_}.a
IOS_MIN=14.0
MACOS_MIN=11.0
OUT=$ROOT/target/apple
FW=$OUT/Mote.xcframework
# The Swift package's binary target (Package.swift, Apple platforms) is this copy: SwiftPM wants
# a local binary target inside the package folder.
PKG_FW=$ROOT/bindings-swift/Mote.xcframework
TARGET_DIR=$MOTE_CACHE/target-apple

# slice id | rust target | platform for macho_check | minimum OS
SLICES=(
  "ios-arm64|aarch64-apple-ios|ios|$IOS_MIN"
  "ios-arm64-simulator|aarch64-apple-ios-sim|ios-simulator|$IOS_MIN"
  "macos-arm64|aarch64-apple-darwin|macos|$MACOS_MIN"
)

PY=${MOTE_PYTHON:-python3}

if [ "${1:-}" != "--check-only" ]; then
  "$HERE/trixie.sh" >/dev/null
  for s in "${SLICES[@]}"; do
    IFS='|' read -r id triple _platform _min <<<"$s"
    echo "=== build-xcframework: $triple ===" >&2
    start=$(date +%s)
    # Cargo builds every crate type a dependency declares, so mote-ffi's cdylib is linked too
    # (nothing uses it: its code is in the static library through the rlib). That link needs
    # Apple's SDK and linker, which are not here: rustc gets an empty folder as SDKROOT and
    # `true` as the linker, so the unused dylib is simply not written. The static library
    # itself is never linked. The standard library is built without its `backtrace` feature,
    # as for Android (docs/footprint.md): panics are still caught and reported.
    v=$(echo "$triple" | tr 'a-z-' 'A-Z_')
    mkdir -p "$TARGET_DIR/no-sdk"
    "$HERE/in-trixie.sh" env RUSTC_BOOTSTRAP=1 CARGO_TARGET_DIR="$TARGET_DIR" \
      SDKROOT="$TARGET_DIR/no-sdk" "CARGO_TARGET_${v}_LINKER=true" \
      IPHONEOS_DEPLOYMENT_TARGET=$IOS_MIN MACOSX_DEPLOYMENT_TARGET=$MACOS_MIN \
      cargo rustc --locked -Zbuild-std=std,panic_abort \
      -Zbuild-std-features=panic-unwind,std_detect_file_io,std_detect_dlsym_getauxval \
      --profile mobile --target "$triple" \
      -p "$CRATE" --features "$FEATURES" --lib --crate-type staticlib >&2
    echo "build-xcframework: $triple built in $(( $(date +%s) - start )) s" >&2
  done

  rm -rf "$FW" "$OUT/Mote.xcframework.zip" "$OUT/Mote.xcframework.zip.sha256"
  mkdir -p "$FW"
  for s in "${SLICES[@]}"; do
    IFS='|' read -r id triple _platform _min <<<"$s"
    mkdir -p "$FW/$id/Headers"
    cp "$TARGET_DIR/$triple/mobile/$LIBFILE" "$FW/$id/libmote.a"
    cp ffi/include/mote.h "$FW/$id/Headers/mote.h"
    cp bindings-swift/Sources/MoteFFI/include/moteFFI.h "$FW/$id/Headers/moteFFI.h"
    # Two modules: the C ABI for C/Objective-C/Swift callers, and the uniffi bridge that
    # the Swift package's generated code imports (its module map, as generated).
    { printf 'module MoteC {\n    header "mote.h"\n    export *\n}\n'
      cat bindings-swift/Sources/MoteFFI/include/module.modulemap; echo; } >"$FW/$id/Headers/module.modulemap"
  done

  "$PY" - "$FW" "$OUT/Mote.xcframework.zip" <<'EOF'
import hashlib, os, plistlib, sys, zipfile
fw, zip_path = sys.argv[1], sys.argv[2]
libs = []
for ident, platform, variant in [("ios-arm64", "ios", None),
                                 ("ios-arm64-simulator", "ios", "simulator"),
                                 ("macos-arm64", "macos", None)]:
    entry = {"BinaryPath": "libmote.a", "HeadersPath": "Headers", "LibraryIdentifier": ident,
             "LibraryPath": "libmote.a", "SupportedArchitectures": ["arm64"],
             "SupportedPlatform": platform}
    if variant:
        entry["SupportedPlatformVariant"] = variant
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
fi

passed=0
failed=0
ok() { echo "ok   $*"; passed=$((passed + 1)); }
bad() { echo "FAIL $*"; failed=$((failed + 1)); }

# The Info.plist read back: three slices, the identifiers, platforms and variant as written.
if "$PY" - "$FW/Info.plist" <<'EOF'
import plistlib, sys
info = plistlib.load(open(sys.argv[1], "rb"))
assert info["CFBundlePackageType"] == "XFWK" and info["XCFrameworkFormatVersion"] == "1.0"
got = sorted((l["LibraryIdentifier"], l["SupportedPlatform"], l.get("SupportedPlatformVariant"),
              tuple(l["SupportedArchitectures"]), l["LibraryPath"], l["HeadersPath"])
             for l in info["AvailableLibraries"])
want = [("ios-arm64", "ios", None, ("arm64",), "libmote.a", "Headers"),
        ("ios-arm64-simulator", "ios", "simulator", ("arm64",), "libmote.a", "Headers"),
        ("macos-arm64", "macos", None, ("arm64",), "libmote.a", "Headers")]
assert got == want, got
EOF
then ok "Info.plist lists ios-arm64, ios-arm64-simulator, macos-arm64 (arm64, libmote.a, Headers)"
else bad "Info.plist does not describe the three slices"
fi

if [ -f "$OUT/Mote.xcframework.zip" ] &&
   [ "$(sha256sum "$OUT/Mote.xcframework.zip" | cut -d' ' -f1)" = "$(cat "$OUT/Mote.xcframework.zip.sha256")" ]; then
  ok "Mote.xcframework.zip checksum $(cat "$OUT/Mote.xcframework.zip.sha256")"
else
  bad "Mote.xcframework.zip missing or its checksum file does not match"
fi

for s in "${SLICES[@]}"; do
  IFS='|' read -r id _triple platform min <<<"$s"
  for f in libmote.a Headers/mote.h Headers/moteFFI.h Headers/module.modulemap; do
    [ -s "$FW/$id/$f" ] || bad "$id/$f missing"
  done
  log=$(mktemp)
  if "$PY" "$HERE/lib/macho_check.py" "$FW/$id/libmote.a" --platform "$platform" --minos "$min" \
      --require mote_model_load --require mote_session_run --require-prefix mote_ \
      --require TVMFFIErrorSetRaisedFromCStrParts --require TVMFFIEnvModRegisterSystemLibSymbol \
      --require TVMBackendParallelLaunch --require mote_model_from_system_lib --require mote_model_load_with_options \
      --require uniffi_mote_swift_fn_constructor_nativemodel_load --require uniffi_mote_swift_fn_constructor_nativemodel_from_system_lib \
      --require-prefix uniffi_mote_swift_fn_ --require ffi_mote_swift_uniffi_contract_version \
      --require-undefined BNNSFilterCreateLayerConvolution \
      --exports-exactly ffi/abi/symbols.txt >"$log" 2>&1; then
    ok "$id: $(grep -c '^ok' "$log") Mach-O checks ($(grep -o '[0-9]* Mach-O objects' "$log"))"
  else
    bad "$id: $(grep '^FAIL' "$log" | head -3 | tr '\n' ' ')"
  fi
  rm -f "$log"
done

echo "xcframework checks: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
