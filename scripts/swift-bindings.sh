#!/usr/bin/env bash
# Generate the Swift bindings of both Swift libraries with uniffi and check them in, or check for
# drift: mote-swift (the product `Mote`, uniffi namespace `mote`) and mote-swift-rpc (the
# product `MoteRPC`, namespace `mote_rpc`; docs/swiftpm.md, "Two products").
#
#   scripts/swift-bindings.sh            # write bindings-swift/Sources/{MoteUniFFI,MoteFFI/include}
#                                        # and bindings-swift/Sources/{MoteRPCUniFFI,MoteRPCFFI/include}
#   scripts/swift-bindings.sh --check    # generate into a temp dir; fail if the checked-in files differ
#   scripts/swift-bindings.sh --test-hooks DIR
#                                        # mote-swift's bindings of a `test-hooks` build, written to
#                                        # DIR/{MoteUniFFI,MoteFFI/include} (never checked in:
#                                        # scripts/test-swift.sh points the package at them;
#                                        # mote-swift-rpc has no test hooks)
#
# Builds `mote-swift` with its `bindgen` feature (the library and the `uniffi-bindgen` binary of
# the same uniffi version) and `mote-swift-rpc` in the same cargo run, then runs
# `uniffi-bindgen generate --library` on each built library: the proc-macros store the interface
# in the library itself, so there is no UDL file.
# MOTE_SWIFT_CARGO_ARGS: extra cargo arguments (e.g. --release).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
ROOT=$(git -C "$HERE" rev-parse --show-toplevel 2>/dev/null || (cd "$HERE/.." && pwd -P))
cd "$ROOT"

check=0
hooks_dir=""
features=bindgen
case "${1:-}" in
  --check) check=1 ;;
  --test-hooks)
    [ -n "${2:-}" ] || { echo "swift-bindings: --test-hooks needs a directory" >&2; exit 2; }
    hooks_dir=$2
    features=bindgen,test-hooks ;;
  "") ;;
  *) echo "swift-bindings: unknown argument $1" >&2; exit 2 ;;
esac

# One cargo run for both libraries (the same uniffi features), unless only the test-hooks build
# of mote-swift is wanted.
packages=(-p mote-swift -p mote-swift-rpc)
[ -z "$hooks_dir" ] || packages=(-p mote-swift)
feature_list=""
for f in ${features//,/ }; do feature_list="$feature_list${feature_list:+,}mote-swift/$f"; done
# mote-swift-rpc with its own `bindgen` too: the build scripts/test-ios-app.sh makes, not a second one.
[ -n "$hooks_dir" ] || feature_list="$feature_list,mote-swift-rpc/bindgen"
# shellcheck disable=SC2086
cargo build --locked "${packages[@]}" --features "$feature_list" ${MOTE_SWIFT_CARGO_ARGS:-} >&2
profile=debug
case " ${MOTE_SWIFT_CARGO_ARGS:-} " in *" --release "*) profile=release ;; esac
target_dir=${CARGO_TARGET_DIR:-$ROOT/target}

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# generate LIBNAME NAMESPACE UNIFFI_TARGET FFI_TARGET: uniffi's Swift for lib$LIBNAME.so (the
# generated NAMESPACE.swift, NAMESPACEFFI.h, NAMESPACEFFI.modulemap) laid out as the package's
# targets under $out/tree/Sources, and the paths written appended to `files`.
files=()
generate() {
  local lib="$target_dir/$profile/lib$1.so" ns=$2 uniffi=$3 ffi=$4
  [ -f "$lib" ] || { echo "swift-bindings: $lib was not built" >&2; exit 1; }
  rm -rf "$out/gen"
  # (uniffi's note that swift-format is not installed is dropped: the files are used as generated.)
  "$target_dir/$profile/uniffi-bindgen" generate --library "$lib" --language swift \
    --out-dir "$out/gen" 2>&1 | { grep -v 'swift-format' || true; } >&2
  mkdir -p "$out/tree/Sources/$uniffi" "$out/tree/Sources/$ffi/include"
  cp "$out/gen/$ns.swift" "$out/tree/Sources/$uniffi/$ns.swift"
  cp "$out/gen/${ns}FFI.h" "$out/tree/Sources/$ffi/include/${ns}FFI.h"
  # SwiftPM reads a C target's module map from include/module.modulemap.
  cp "$out/gen/${ns}FFI.modulemap" "$out/tree/Sources/$ffi/include/module.modulemap"
  files+=("Sources/$uniffi/$ns.swift" "Sources/$ffi/include/${ns}FFI.h" "Sources/$ffi/include/module.modulemap")
}
generate mote_swift mote MoteUniFFI MoteFFI
[ -n "$hooks_dir" ] || generate mote_swift_rpc mote_rpc MoteRPCUniFFI MoteRPCFFI

if [ -n "$hooks_dir" ]; then
  rm -rf "$hooks_dir" && mkdir -p "$hooks_dir"
  cp -R "$out/tree/Sources/MoteUniFFI" "$out/tree/Sources/MoteFFI" "$hooks_dir/"
  # A C target needs a source file: the same empty one as the checked-in target's.
  cp bindings-swift/Sources/MoteFFI/shim.c "$hooks_dir/MoteFFI/"
  echo "swift-bindings: wrote the test-hooks bindings under $hooks_dir" >&2
  exit 0
fi
if [ $check = 1 ]; then
  drift=0
  for f in "${files[@]}"; do
    if ! diff -u "bindings-swift/$f" "$out/tree/$f" >&2; then
      echo "swift-bindings: bindings-swift/$f differs from what uniffi generates; run scripts/swift-bindings.sh" >&2
      drift=1
    fi
  done
  [ $drift = 0 ] && echo "swift-bindings: the checked-in bindings match the libraries (mote_swift, mote_swift_rpc)" >&2
  exit $drift
fi
for f in "${files[@]}"; do
  mkdir -p "$(dirname "bindings-swift/$f")"
  cp "$out/tree/$f" "bindings-swift/$f"
done
echo "swift-bindings: wrote ${files[*]} under bindings-swift/" >&2
