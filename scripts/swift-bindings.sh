#!/usr/bin/env bash
# Generate the Swift bindings of mote-swift with uniffi and check them in, or check for drift.
#
#   scripts/swift-bindings.sh            # write bindings-swift/Sources/{MoteUniFFI,MoteFFI/include}
#   scripts/swift-bindings.sh --check    # generate into a temp dir; fail if the checked-in files differ
#   scripts/swift-bindings.sh --test-hooks DIR
#                                        # the bindings of a `test-hooks` build, written to
#                                        # DIR/{MoteUniFFI,MoteFFI/include} (never checked in:
#                                        # scripts/test-swift.sh points the package at them)
#
# Builds `mote-swift` with its `bindgen` feature (the library and the `uniffi-bindgen` binary of
# the same uniffi version), then runs `uniffi-bindgen generate --library` on the built library:
# the proc-macros store the interface in the library itself, so there is no UDL file.
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

# shellcheck disable=SC2086
cargo build --locked -p mote-swift --features "$features" ${MOTE_SWIFT_CARGO_ARGS:-} >&2
profile=debug
case " ${MOTE_SWIFT_CARGO_ARGS:-} " in *" --release "*) profile=release ;; esac
target_dir=${CARGO_TARGET_DIR:-$ROOT/target}
lib="$target_dir/$profile/libmote_swift.so"
[ -f "$lib" ] || { echo "swift-bindings: $lib was not built" >&2; exit 1; }

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# (uniffi's note that swift-format is not installed is dropped: the files are used as generated.)
"$target_dir/$profile/uniffi-bindgen" generate --library "$lib" --language swift \
  --out-dir "$out/gen" 2>&1 | { grep -v 'swift-format' || true; } >&2
mkdir -p "$out/tree/Sources/MoteUniFFI" "$out/tree/Sources/MoteFFI/include"
cp "$out/gen/mote.swift" "$out/tree/Sources/MoteUniFFI/mote.swift"
cp "$out/gen/moteFFI.h" "$out/tree/Sources/MoteFFI/include/moteFFI.h"
# SwiftPM reads a C target's module map from include/module.modulemap.
cp "$out/gen/moteFFI.modulemap" "$out/tree/Sources/MoteFFI/include/module.modulemap"

files=(Sources/MoteUniFFI/mote.swift Sources/MoteFFI/include/moteFFI.h Sources/MoteFFI/include/module.modulemap)
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
  [ $drift = 0 ] && echo "swift-bindings: the checked-in bindings match the library" >&2
  exit $drift
fi
for f in "${files[@]}"; do
  cp "$out/tree/$f" "bindings-swift/$f"
done
echo "swift-bindings: wrote ${files[*]} under bindings-swift/" >&2
