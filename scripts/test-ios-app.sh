#!/usr/bin/env bash
# The iOS RPC app's core (ios-app/, package MoteRPCApp, target RPCAppCore): `swift test` on Linux.
#
#   MOTE_ZOO_DIR=... MOTE_OFFLOAD_ZOO_DIR=... MOTE_PYTHON=... scripts/test-ios-app.sh
#
# 1. `cargo build -p mote-swift-rpc` on the host (as scripts/test-swift.sh builds mote-swift,
#    and for the same reason: the library links only glibc symbols older than trixie's, so the
#    chroot's Swift links and runs it). The app's package takes the product `MoteRPC` alone
#    (docs/swiftpm.md, "Two products"): libmote_swift is not linked.
# 2. The zoo's system-library objects (syslib/NAME.tar of MOTE_ZOO_DIR) in one archive, linked
#    whole into the test executable (docs/system-lib.md §5), as a phone app links its models;
#    MOTE_SYSLIB_MODELS names them for the tests.
# 3. `swift test` (XCTest, Swift 6.0.3) in ios-app/ in the trixie chroot (scripts/in-trixie.sh),
#    linking target/debug/libmote_swift_rpc.so through the `Mote` package's product `MoteRPC`
#    (MOTE_SWIFT_LIB_DIR): RPCAppCoreTests, and MoteRPCTests (the RPCServer's own tests, which
#    live here because this package links MoteRPC alone). The tests run TVM's Python client with
#    MOTE_PYTHON inside the chroot: the interpreter the venv points at is bound in too.
# 4. Three checks of the app target, which is not built here (no SwiftUI or Apple SDK:
#    ios-app/README.md): `swiftc -parse` of ios-app/App/*.swift (syntax only, no types);
#    App/Info.plist read with plistlib, with its bundle keys and NSLocalNetworkUsageDescription;
#    and what `xcodegen generate` writes there (XcodeGen's rule applied to project.yml, which
#    needs PyYAML from the venv) equal to that file.
# Ends with `ios app checks: N passed, M failed` (N: XCTest cases that passed + those three).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
# shellcheck source=lib/swift-common.sh
. "$HERE/lib/swift-common.sh"
ROOT=$(git -C "$HERE" rev-parse --show-toplevel 2>/dev/null || (cd "$HERE/.." && pwd -P))
cd "$ROOT"

missing=()
[ -n "${MOTE_ZOO_DIR:-}" ] && [ -f "${MOTE_ZOO_DIR}/manifest.json" ] || missing+=("MOTE_ZOO_DIR (the x86_64 zoo: \`scripts/zoo.sh | tail -1\`)")
[ -n "${MOTE_OFFLOAD_ZOO_DIR:-}" ] && [ -f "${MOTE_OFFLOAD_ZOO_DIR}/manifest.json" ] || missing+=("MOTE_OFFLOAD_ZOO_DIR (the x86_64 offload zoo: \`scripts/offload-zoo.sh | tail -1\`)")
[ -n "${MOTE_PYTHON:-}" ] && [ -x "${MOTE_PYTHON}" ] || missing+=("MOTE_PYTHON (the TVM 0.27 venv's python: \`scripts/venv.sh\`)")
if [ ${#missing[@]} -gt 0 ]; then
  for m in "${missing[@]}"; do echo "test-ios-app: set $m" >&2; done
  echo "ios app checks: 0 passed, 1 failed"
  exit 1
fi

log=$(mktemp)
trap 'rm -f "$log"' EXIT
fail() { echo "test-ios-app: $*" >&2; echo "ios app checks: ${passed:-0} passed, $(( ${failed:-0} + 1 )) failed"; exit 1; }

echo "=== test-ios-app: cargo build -p mote-swift-rpc ===" >&2
cargo build --locked -p mote-swift-rpc --features bindgen >&2 || fail "cargo build failed"

# The interpreter behind the venv's python, bound into the chroot at the same path.
binds=$(python_binds "$MOTE_PYTHON")

# The zoo's system-library objects in one archive, linked whole into the test executable
# (docs/system-lib.md): the static-model tests load them by prefix.
syslib_dir="${CARGO_TARGET_DIR:-$ROOT/target}/ios-app-syslib"
zoo_syslib_archive "$syslib_dir" "$MOTE_ZOO_DIR" "$MOTE_PYTHON" || fail "cannot link the zoo's system libraries"

app_passed=0
app_failed=0
echo "=== test-ios-app: swiftc -parse ios-app/App/*.swift (syntax only) ===" >&2
if "$HERE/in-trixie.sh" sh -c 'swiftc -parse ios-app/App/*.swift' >&2; then
  app_passed=$(( app_passed + 1 ))
else
  echo "test-ios-app: ios-app/App/*.swift do not parse" >&2; app_failed=$(( app_failed + 1 ))
fi
echo "=== test-ios-app: ios-app/App/Info.plist ===" >&2
if "$MOTE_PYTHON" - "$ROOT/ios-app/App/Info.plist" >&2 <<'PY'; then
import plistlib, sys
p = plistlib.load(open(sys.argv[1], "rb"))
need = ["CFBundleIdentifier", "CFBundleExecutable", "CFBundlePackageType", "NSLocalNetworkUsageDescription",
        "UILaunchScreen"]
missing = [k for k in need if k not in p]
assert not missing, f"Info.plist lacks {missing}"
assert p["CFBundlePackageType"] == "APPL" and p["NSLocalNetworkUsageDescription"].strip()
assert "UIBackgroundModes" not in p, "the app claims no background mode (README)"
print("Info.plist: ok")
PY
  app_passed=$(( app_passed + 1 ))
else
  echo "test-ios-app: ios-app/App/Info.plist is not what the app needs" >&2; app_failed=$(( app_failed + 1 ))
fi
echo "=== test-ios-app: what xcodegen generate writes to App/Info.plist ===" >&2
if "$MOTE_PYTHON" - "$ROOT/ios-app/project.yml" "$ROOT/ios-app/App/Info.plist" >&2 <<'PY'; then
# XcodeGen (Sources/XcodeGenKit) writes a target's `info.path` on every generation: its default
# keys for the target type (InfoPlistGenerator.generateProperties) merged with, and overridden
# by, `info.properties`. The result must be the checked-in file, or generating the project
# would silently drop what the app needs (the local-network text, the launch screen).
import plistlib, sys, yaml
spec = yaml.safe_load(open(sys.argv[1]))
checked_in = plistlib.load(open(sys.argv[2], "rb"))
target = spec["targets"]["MoteRPC"]
info = target.get("info")
assert info and info.get("path") == "App/Info.plist", f"the app target's info is {info!r}"
kind = {"application": "APPL", "framework": "FMWK", "bundle": "BNDL"}.get(target["type"])
generated = {
    "CFBundleIdentifier": "$(PRODUCT_BUNDLE_IDENTIFIER)",
    "CFBundleInfoDictionaryVersion": "6.0",
    "CFBundleName": "$(PRODUCT_NAME)",
    "CFBundleDevelopmentRegion": "$(DEVELOPMENT_LANGUAGE)",
    "CFBundleShortVersionString": "1.0",
    "CFBundleVersion": "1",
}
if target["type"] != "bundle":
    generated["CFBundleExecutable"] = "$(EXECUTABLE_NAME)"
if kind:
    generated["CFBundlePackageType"] = kind
generated.update(info.get("properties") or {})
diff = sorted(k for k in set(generated) | set(checked_in) if generated.get(k) != checked_in.get(k))
assert not diff, "xcodegen would write App/Info.plist differently: " + ", ".join(
    f"{k}: {generated.get(k)!r} instead of {checked_in.get(k)!r}" for k in diff)
print(f"xcodegen's Info.plist: the checked-in one ({len(generated)} keys)")
PY
  app_passed=$(( app_passed + 1 ))
else
  echo "test-ios-app: xcodegen generate would overwrite ios-app/App/Info.plist with other keys" >&2; app_failed=$(( app_failed + 1 ))
fi

echo "=== test-ios-app: swift test in ios-app (trixie chroot) ===" >&2
set +e
MOTE_SWIFT_LIB_DIR="${CARGO_TARGET_DIR:-$ROOT/target}/debug" MOTE_PYTHON="$MOTE_PYTHON" \
MOTE_TRIXIE_BINDS="${MOTE_TRIXIE_BINDS:-} $binds" \
  "$HERE/in-trixie.sh" sh -c 'cd ios-app && swift test -Xlinker --whole-archive \
    -Xlinker "$0" -Xlinker --no-whole-archive -Xlinker -lm 2>&1' "$syslib_dir/libzoo_syslib.a" | tee "$log" >&2
rc=${PIPESTATUS[0]}
set -e
# Counted wherever they stand in a line, as in test-swift.sh (stderr can run into them).
passed=$( (grep -oE "Test Case '[^']+' passed" "$log" || true) | wc -l)
failed=$( (grep -oE "Test Case '[^']+' failed" "$log" || true) | wc -l)
if [ "$rc" != 0 ] && [ "$failed" = 0 ]; then failed=1; fi   # a crash or build failure
if [ "$passed" = 0 ]; then failed=$(( failed + 1 )); fi    # no XCTest case passed: never a pass
passed=$(( passed + app_passed ))
failed=$(( failed + app_failed ))
echo "ios app checks: $passed passed, $failed failed"
[ "$failed" = 0 ]
