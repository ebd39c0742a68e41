#!/usr/bin/env bash
# The root Swift package as SwiftPM sees it (docs/swiftpm.md). Runs after
# scripts/build-xcframework.sh (it reads target/apple) and scripts/test-swift.sh (whose host
# build of libmote_swift `swift build` links), all Swift in the trixie chroot (Swift 6.0.3).
#
#   scripts/test-swiftpm.sh
#
# 1. `swift package dump-package` of the root manifest on Linux: product `Mote`, targets MoteFFI
#    (C), MoteUniFFI, Mote (with PrivacyInfo.xcprivacy as a resource) and MoteTests, at their
#    bindings-swift/ paths; then with MOTE_SWIFTPM_APPLE=1, the branch Apple hosts take: the
#    binary target MoteNative at bindings-swift/Mote.xcframework, Accelerate linked, no C target.
# 2. The release form: a copy of the manifest rewritten by scripts/swiftpm-release.sh with the
#    zip build-xcframework.sh made and an https URL; its Apple branch names exactly that URL and
#    the checksum `swift package compute-checksum` computes for the zip, and the zip holds
#    Mote.xcframework/Info.plist at its root (where SwiftPM looks). The script refuses a URL that
#    is not https, and a manifest without its one `let release` line.
# 3. `swift build` of the root package (product Mote) on Linux.
# 4. ios-app's manifest reaches the root package by path (`.package(name: "Mote", path: "..")`).
# 5. The privacy manifests (the package's and the iOS app's): valid plists with no tracking, and
#    every required-reason API category (Apple's list: file timestamps, system boot time, disk
#    space, user defaults) whose C functions any slice's libmote.a references (llvm-nm), or
#    whose Foundation API the Swift sources name, declared with a reason.
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
    assert [(p["name"], p["targets"]) for p in d["products"]] == [("Mote", ["Mote"])], d["products"]
    t = targets(d)
    assert t["Mote"]["path"] == "bindings-swift/Sources/Mote"
    assert t["Mote"]["resources"] == [{"path": "PrivacyInfo.xcprivacy", "rule": {"copy": {}}}], t["Mote"]["resources"]
    assert t["MoteUniFFI"]["path"] == "bindings-swift/Sources/MoteUniFFI"
    assert t["MoteTests"]["type"] == "test" and t["MoteTests"]["path"] == "bindings-swift/Tests/MoteTests"
lt, at = targets(linux), targets(apple)
assert sorted(lt) == ["Mote", "MoteFFI", "MoteTests", "MoteUniFFI"], sorted(lt)
assert lt["MoteFFI"]["type"] == "regular" and lt["MoteFFI"]["path"] == "bindings-swift/Sources/MoteFFI"
assert sorted(at) == ["Mote", "MoteNative", "MoteTests", "MoteUniFFI"], sorted(at)
n = at["MoteNative"]
assert n["type"] == "binary" and n["path"] == "bindings-swift/Mote.xcframework" and n.get("url") is None, n
settings = json.dumps(at["MoteUniFFI"]["settings"])
assert "Accelerate" in settings and "unsafeFlags" not in settings, settings
assert "unsafeFlags" in json.dumps(lt["MoteUniFFI"]["settings"])
print("Linux: MoteFFI + MoteUniFFI + Mote + MoteTests; Apple: binary MoteNative at bindings-swift/Mote.xcframework, Accelerate, no unsafeFlags")
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
if [ ! -s "$ZIP" ]; then
  bad "no $ZIP: scripts/build-xcframework.sh runs first"
elif ! "$HERE/swiftpm-release.sh" --url "$url" --zip "$ZIP" --manifest "$tmp/pkg/Package.swift" >"$tmp/rel" 2>&1; then
  bad "swiftpm-release.sh failed: $(tr '\n' ' ' <"$tmp/rel")"
elif ! "$HERE/in-trixie.sh" sh -c 'cd "$0/pkg" && MOTE_SWIFTPM_APPLE=1 swift package dump-package >"$0/release.json" &&
        swift package compute-checksum "$1" >"$0/checksum"' "$tmp" "$ZIP" 2>"$tmp/err"; then
  bad "release manifest: $(tail -3 "$tmp/err" | tr '\n' ' ')"
else
  if out=$("$PY" - "$tmp/release.json" "$tmp/checksum" "$url" "$ZIP" <<'EOF' 2>&1
import json, sys, zipfile
d = json.load(open(sys.argv[1]))
want_sum, url, zip_path = open(sys.argv[2]).read().strip(), sys.argv[3], sys.argv[4]
n = {t["name"]: t for t in d["targets"]}["MoteNative"]
assert n["type"] == "binary" and n.get("path") is None, n
assert n["url"] == url, (n["url"], url)
assert n["checksum"] == want_sum, (n["checksum"], want_sum)
names = zipfile.ZipFile(zip_path).namelist()
assert "Mote.xcframework/Info.plist" in names, names[:5]
assert all(x.startswith("Mote.xcframework/") for x in names), [x for x in names if not x.startswith("Mote.xcframework/")][:3]
print(f"binary target {url} checksum {want_sum[:16]}... = swift package compute-checksum; zip root Mote.xcframework/")
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

# 3. swift build of the root package, linking the host build of libmote_swift.
if "$HERE/in-trixie.sh" env MOTE_SWIFT_LIB_DIR="${CARGO_TARGET_DIR:-$ROOT/target}/debug" \
    swift build --product Mote >"$tmp/build" 2>&1; then
  ok "swift build --product Mote (root package, Linux): $(grep -oE "Build (of product 'Mote' )?complete!.*" "$tmp/build" | tail -1)"
else
  bad "swift build of the root package: $(tail -5 "$tmp/build" | tr '\n' ' ')"
fi

# 4. ios-app names the root package by path.
if "$HERE/in-trixie.sh" sh -c 'cd ios-app && swift package dump-package' >"$tmp/app.json" 2>"$tmp/err" &&
   "$PY" - "$tmp/app.json" "$ROOT" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
deps = [x["fileSystem"][0] for x in d["dependencies"]]
assert [(x["nameForTargetDependencyResolutionOnly"], x["path"]) for x in deps] == [("Mote", sys.argv[2])], deps
EOF
then ok "ios-app depends on the root package by path"
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
syms="$tmp/undefined.txt"
: >"$syms"
for a in "$FW"/*/libmote.a; do
  [ -f "$a" ] || continue
  "$HERE/in-trixie.sh" llvm-nm-19 --undefined-only -j "$a" 2>/dev/null >>"$syms" || true
done
if [ ! -s "$syms" ]; then
  bad "no undefined symbols read from $FW/*/libmote.a"
elif out=$(privacy_check bindings-swift/Sources/Mote/PrivacyInfo.xcprivacy "$syms" bindings-swift/Sources/Mote 2>&1); then
  ok "package privacy manifest: $out"
else
  bad "package privacy manifest: $out"
fi
if out=$(privacy_check ios-app/App/PrivacyInfo.xcprivacy "" ios-app/Sources ios-app/App 2>&1); then
  ok "iOS app privacy manifest: $out"
else
  bad "iOS app privacy manifest: $out"
fi

echo "swiftpm checks: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
