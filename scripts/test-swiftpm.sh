#!/usr/bin/env bash
# The root Swift package as SwiftPM sees it (docs/swiftpm.md). Runs after
# scripts/build-xcframework.sh (it reads target/apple) and scripts/test-swift.sh (whose host
# build of libmote_swift `swift build` links), all Swift in the trixie chroot (Swift 6.0.3).
#
#   scripts/test-swiftpm.sh
#
# 1. `swift package dump-package` of the root manifest on Linux: products `Mote` and `MoteRPC`
#    (docs/swiftpm.md, "Two products"), targets MoteFFI (C), MoteUniFFI, Mote (with
#    PrivacyInfo.xcprivacy as a resource) and MoteTests, and MoteRPCFFI, MoteRPCUniFFI, MoteRPC
#    (the same resource, the define MOTE_RPC), at their bindings-swift/ paths; then with
#    MOTE_SWIFTPM_APPLE=1, the branch Apple hosts take: the binary targets MoteNative at
#    bindings-swift/Mote.xcframework and MoteRPCNative at bindings-swift/MoteRPC.xcframework,
#    Accelerate linked, no C target.
# 2. The release form: a copy of the manifest rewritten by scripts/swiftpm-release.sh with the
#    zips build-xcframework.sh made and an https URL; its Apple branch names exactly that URL
#    (and MoteRPC.xcframework.zip beside it) and the checksums `swift package compute-checksum`
#    computes for the zips, and each zip holds NAME.xcframework/Info.plist at its root (where
#    SwiftPM looks). The script refuses a URL that is not https, and a manifest without its one
#    `let release` line.
# 3. `swift build` of the root package's products Mote and MoteRPC on Linux.
# 4. ios-app's manifest reaches the root package by path (`.package(name: "Mote", path: "..")`)
#    and its targets take the product MoteRPC, never Mote.
# 5. The privacy manifests (the package's, for each product, and the iOS app's): valid plists
#    with no tracking, and every required-reason API category (Apple's list: file timestamps,
#    system boot time, disk space, user defaults) whose C functions any slice's static library
#    references (llvm-nm), or whose Foundation API the Swift sources name, declared with a
#    reason.
# Ends with "swiftpm checks: N passed, M failed".
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
ROOT=$(git -C "$HERE" rev-parse --show-toplevel 2>/dev/null || (cd "$HERE/.." && pwd -P))
cd "$ROOT"
PY=${MOTE_PYTHON:-python3}
passed=0
failed=0
ok() { echo "ok   $*"; passed=$((passed + 1)); }
bad() { echo "FAIL $*"; failed=$((failed + 1)); }
FW=$ROOT/target/apple/Mote.xcframework
ZIP=$ROOT/target/apple/Mote.xcframework.zip
RPC_FW=$ROOT/target/apple/MoteRPC.xcframework
RPC_ZIP=$ROOT/target/apple/MoteRPC.xcframework.zip
tmp=$(mktemp -d /tmp/swiftpm.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

# 1. The manifest's two branches.
if "$HERE/in-trixie.sh" sh -c 'swift package dump-package >"$0/linux.json" &&
     MOTE_SWIFTPM_APPLE=1 swift package dump-package >"$0/apple.json"' "$tmp" 2>"$tmp/err"; then
  if out=$("$PY" - "$tmp/linux.json" "$tmp/apple.json" <<'EOF' 2>&1
import json, sys
linux, apple = (json.load(open(p)) for p in sys.argv[1:3])
def targets(d):
    return {t["name"]: t for t in d["targets"]}
for d in (linux, apple):
    assert d["name"] == "Mote", d["name"]
    assert [(p["name"], p["targets"]) for p in d["products"]] == [("Mote", ["Mote"]), ("MoteRPC", ["MoteRPC"])], d["products"]
    t = targets(d)
    resource = [{"path": "PrivacyInfo.xcprivacy", "rule": {"copy": {}}}]
    assert t["Mote"]["path"] == "bindings-swift/Sources/Mote"
    assert t["Mote"]["resources"] == resource, t["Mote"]["resources"]
    assert [x["byName"][0] for x in t["Mote"]["dependencies"]] == ["MoteUniFFI"], t["Mote"]["dependencies"]
    assert t["MoteUniFFI"]["path"] == "bindings-swift/Sources/MoteUniFFI"
    assert t["MoteTests"]["type"] == "test" and t["MoteTests"]["path"] == "bindings-swift/Tests/MoteTests"
    assert t["MoteRPC"]["path"] == "bindings-swift/Sources/MoteRPC"
    assert t["MoteRPC"]["resources"] == resource, t["MoteRPC"]["resources"]
    assert [x["byName"][0] for x in t["MoteRPC"]["dependencies"]] == ["MoteRPCUniFFI"], t["MoteRPC"]["dependencies"]
    assert "MOTE_RPC" in json.dumps(t["MoteRPC"]["settings"]), t["MoteRPC"]["settings"]
    assert t["MoteRPCUniFFI"]["path"] == "bindings-swift/Sources/MoteRPCUniFFI"
lt, at = targets(linux), targets(apple)
assert sorted(lt) == ["Mote", "MoteFFI", "MoteRPC", "MoteRPCFFI", "MoteRPCUniFFI", "MoteTests", "MoteUniFFI"], sorted(lt)
assert lt["MoteFFI"]["type"] == "regular" and lt["MoteFFI"]["path"] == "bindings-swift/Sources/MoteFFI"
assert lt["MoteRPCFFI"]["type"] == "regular" and lt["MoteRPCFFI"]["path"] == "bindings-swift/Sources/MoteRPCFFI"
assert sorted(at) == ["Mote", "MoteNative", "MoteRPC", "MoteRPCNative", "MoteRPCUniFFI", "MoteTests", "MoteUniFFI"], sorted(at)
for name, path, bridge in (("MoteNative", "bindings-swift/Mote.xcframework", "MoteUniFFI"),
                           ("MoteRPCNative", "bindings-swift/MoteRPC.xcframework", "MoteRPCUniFFI")):
    n = at[name]
    assert n["type"] == "binary" and n["path"] == path and n.get("url") is None, n
    settings = json.dumps(at[bridge]["settings"])
    assert "Accelerate" in settings and "unsafeFlags" not in settings, settings
    assert [x["byName"][0] for x in at[bridge]["dependencies"]] == [name], at[bridge]["dependencies"]
for bridge, lib in (("MoteUniFFI", "mote_swift"), ("MoteRPCUniFFI", "mote_swift_rpc")):
    settings = json.dumps(lt[bridge]["settings"])
    assert "unsafeFlags" in settings and f'"{lib}"' in settings, settings
print("Linux: MoteFFI + MoteUniFFI + Mote + MoteTests, MoteRPCFFI + MoteRPCUniFFI + MoteRPC; Apple: binary MoteNative at bindings-swift/Mote.xcframework and MoteRPCNative at bindings-swift/MoteRPC.xcframework, Accelerate, no unsafeFlags")
EOF
  ); then ok "dump-package: $out"; else bad "dump-package: $out"; fi
else
  bad "swift package dump-package failed: $(tail -3 "$tmp/err" | tr '\n' ' ')"
fi

# 2. The release form, in a copy of the package (the sources it names are linked in).
url="https://example.invalid/mote/releases/download/v0.0.0-ci/Mote.xcframework.zip"
mkdir -p "$tmp/pkg"
cp Package.swift "$tmp/pkg/"
ln -s "$ROOT/bindings-swift" "$tmp/pkg/bindings-swift"
rpc_url="${url%/*}/MoteRPC.xcframework.zip"
if [ ! -s "$ZIP" ] || [ ! -s "$RPC_ZIP" ]; then
  bad "no $ZIP or $RPC_ZIP: scripts/build-xcframework.sh runs first"
elif ! "$HERE/swiftpm-release.sh" --url "$url" --zip "$ZIP" --rpc-zip "$RPC_ZIP" \
    --manifest "$tmp/pkg/Package.swift" >"$tmp/rel" 2>&1; then
  bad "swiftpm-release.sh failed: $(tr '\n' ' ' <"$tmp/rel")"
elif ! "$HERE/in-trixie.sh" sh -c 'cd "$0/pkg" && MOTE_SWIFTPM_APPLE=1 swift package dump-package >"$0/release.json" &&
        swift package compute-checksum "$1" >"$0/checksum" && swift package compute-checksum "$2" >"$0/rpc-checksum"' \
        "$tmp" "$ZIP" "$RPC_ZIP" 2>"$tmp/err"; then
  bad "release manifest: $(tail -3 "$tmp/err" | tr '\n' ' ')"
else
  if out=$("$PY" - "$tmp/release.json" "$tmp/checksum" "$url" "$ZIP" "$tmp/rpc-checksum" "$rpc_url" "$RPC_ZIP" <<'EOF' 2>&1
import json, sys, zipfile
d = json.load(open(sys.argv[1]))
said = []
for target, fw, (sum_path, url, zip_path) in (("MoteNative", "Mote.xcframework", sys.argv[2:5]),
                                              ("MoteRPCNative", "MoteRPC.xcframework", sys.argv[5:8])):
    want_sum = open(sum_path).read().strip()
    n = {t["name"]: t for t in d["targets"]}[target]
    assert n["type"] == "binary" and n.get("path") is None, n
    assert n["url"] == url, (n["url"], url)
    assert n["checksum"] == want_sum, (n["checksum"], want_sum)
    names = zipfile.ZipFile(zip_path).namelist()
    assert f"{fw}/Info.plist" in names, names[:5]
    assert all(x.startswith(f"{fw}/") for x in names), [x for x in names if not x.startswith(f"{fw}/")][:3]
    said.append(f"binary target {url} checksum {want_sum[:16]}... = swift package compute-checksum; zip root {fw}/")
print("; ".join(said))
EOF
  ); then ok "release form: $out"; else bad "release form: $out"; fi
fi
# Refusals: a URL SwiftPM cannot download from, and a manifest without the release line, each
# with its own message.
printf '// no release line\n' >"$tmp/empty.swift"
r1=$("$HERE/swiftpm-release.sh" --url "http://example.invalid/x.zip" --zip "$ZIP" --manifest "$tmp/pkg/Package.swift" 2>&1 && echo ACCEPTED || true)
r2=$("$HERE/swiftpm-release.sh" --url "$url" --zip "$ZIP" --manifest "$tmp/empty.swift" 2>&1 && echo ACCEPTED || true)
if [[ $r1 == *"must be an https URL"* ]] && [[ $r2 == *"has 0 lines like"* ]]; then
  ok "swiftpm-release.sh refuses an http URL and a manifest without 'let release'"
else
  bad "swiftpm-release.sh refusals: '$r1' / '$r2'"
fi

# 3. swift build of the root package's products, on the host builds of libmote_swift and
# libmote_swift_rpc.
for product in Mote MoteRPC; do
  if "$HERE/in-trixie.sh" env MOTE_SWIFT_LIB_DIR="${CARGO_TARGET_DIR:-$ROOT/target}/debug" \
      swift build --product "$product" >"$tmp/build" 2>&1; then
    ok "swift build --product $product (root package, Linux): $(grep -oE "Build (of product '$product' )?complete!.*" "$tmp/build" | tail -1)"
  else
    bad "swift build --product $product of the root package: $(tail -5 "$tmp/build" | tr '\n' ' ')"
  fi
done

# 4. ios-app names the root package by path.
if "$HERE/in-trixie.sh" sh -c 'cd ios-app && swift package dump-package' >"$tmp/app.json" 2>"$tmp/err" &&
   "$PY" - "$tmp/app.json" "$ROOT" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
deps = [x["fileSystem"][0] for x in d["dependencies"]]
assert [(x["nameForTargetDependencyResolutionOnly"], x["path"]) for x in deps] == [("Mote", sys.argv[2])], deps
# The app's package takes the RPC server's product only (docs/swiftpm.md, "Two products").
products = sorted({x["product"][0] for t in d["targets"] for x in t["dependencies"] if "product" in x})
assert products == ["MoteRPC"], products
EOF
then ok "ios-app depends on the root package by path, on its product MoteRPC alone"
else bad "ios-app's dependency on the root package: $(tail -2 "$tmp/err" | tr '\n' ' ')"
fi

# 5. The privacy manifests against what the library and the Swift sources use: the package's
# (the library's symbols and bindings-swift/Sources/Mote) and the iOS app's (its own sources).
privacy_check() {  # MANIFEST SYMBOLS_FILE_OR_EMPTY SWIFT_DIR...
  "$PY" - "$@" <<'EOF'
import os, plistlib, sys
manifest, syms_path, swift_dirs = sys.argv[1], sys.argv[2], sys.argv[3:]
p = plistlib.load(open(manifest, "rb"))
assert p["NSPrivacyTracking"] is False and p["NSPrivacyTrackingDomains"] == [] and p["NSPrivacyCollectedDataTypes"] == [], p
declared = {e["NSPrivacyAccessedAPIType"]: e["NSPrivacyAccessedAPITypeReasons"] for e in p["NSPrivacyAccessedAPITypes"]}
assert all(declared.values()), declared
# Apple's required-reason APIs: the C functions (Mach-O names carry a leading underscore) and
# the Foundation names.
c_apis = {
    "NSPrivacyAccessedAPICategoryFileTimestamp": ["stat", "fstat", "fstatat", "lstat", "getattrlist", "fgetattrlist", "getattrlistat"],
    "NSPrivacyAccessedAPICategorySystemBootTime": ["mach_absolute_time"],
    "NSPrivacyAccessedAPICategoryDiskSpace": ["statfs", "statvfs", "fstatfs", "fstatvfs", "getattrlist", "fgetattrlist", "getattrlistat"],
}
swift_apis = {
    "NSPrivacyAccessedAPICategoryUserDefaults": ["UserDefaults"],
    "NSPrivacyAccessedAPICategorySystemBootTime": ["systemUptime"],
    "NSPrivacyAccessedAPICategoryFileTimestamp": ["creationDate", "modificationDate", "contentModificationDate"],
    "NSPrivacyAccessedAPICategoryDiskSpace": ["volumeAvailableCapacity", "systemFreeSize"],
}
undefined = {l.strip().lstrip("_") for l in open(syms_path) if l.strip()} if syms_path else set()
swift = ""
for d in swift_dirs:
    for top, _dirs, files in os.walk(d):
        swift += "".join(open(os.path.join(top, f)).read() for f in files if f.endswith(".swift"))
assert swift, swift_dirs
used = {}
for cat, names in c_apis.items():
    used_c = [n for n in names if n in undefined or n + "$INODE64" in undefined]
    if used_c:
        used.setdefault(cat, []).extend(used_c)
for cat, names in swift_apis.items():
    used_s = [n for n in names if n in swift]
    if used_s:
        used.setdefault(cat, []).extend(used_s)
missing = {c: n for c, n in used.items() if c not in declared}
assert not missing, f"used but not declared: {missing}"
assert used, "no required-reason API found at all: the scan is broken"
print("; ".join(f"{c.removeprefix('NSPrivacyAccessedAPICategory')} ({', '.join(sorted(set(n)))}) declared {declared[c]}" for c, n in sorted(used.items())))
EOF
}
# Each product's manifest (MoteRPC's is a symbolic link to Mote's) against its own library.
for spec in "Mote|$FW|libmote.a" "MoteRPC|$RPC_FW|libmote_rpc.a"; do
  IFS='|' read -r product fw lib <<<"$spec"
  syms="$tmp/undefined-$product.txt"
  : >"$syms"
  for a in "$fw"/*/"$lib"; do
    [ -f "$a" ] || continue
    "$HERE/in-trixie.sh" llvm-nm-19 --undefined-only -j "$a" 2>/dev/null >>"$syms" || true
  done
  if [ ! -s "$syms" ]; then
    bad "no undefined symbols read from $fw/*/$lib"
  elif out=$(privacy_check "bindings-swift/Sources/$product/PrivacyInfo.xcprivacy" "$syms" "bindings-swift/Sources/$product" 2>&1); then
    ok "$product privacy manifest: $out"
  else
    bad "$product privacy manifest: $out"
  fi
done
if out=$(privacy_check ios-app/App/PrivacyInfo.xcprivacy "" ios-app/Sources ios-app/App 2>&1); then
  ok "iOS app privacy manifest: $out"
else
  bad "iOS app privacy manifest: $out"
fi

echo "swiftpm checks: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
