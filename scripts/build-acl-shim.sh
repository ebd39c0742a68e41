#!/usr/bin/env bash
# Build backends/acl/libmote_acl.so (the Arm Compute Library backend plug-in) for aarch64 Linux,
# inside the Debian trixie chroot (scripts/in-trixie.sh), against libarm-compute-dev:arm64 24.11.
#
#   scripts/build-acl-shim.sh [OUT_DIR]      (default: <repo>/target/acl)
#
# Prints the path of the library as the last line of stdout. Fails loudly when the chroot, the
# aarch64 C++ compiler or the ACL headers/library are missing.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
ROOT=$(cd "$HERE/.." && pwd -P)
OUT=${1:-$ROOT/target/acl}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd -P)

log() { echo "build-acl-shim: $*" >&2; }

[ -x "$HERE/in-trixie.sh" ] || { log "missing $HERE/in-trixie.sh"; exit 1; }

# Everything below runs inside the chroot. OUT must be visible there (the repo, /tmp and the cache
# are; anything else is bound via MOTE_TRIXIE_BINDS).
export MOTE_TRIXIE_BINDS="${MOTE_TRIXIE_BINDS:-} $OUT"
"$HERE/in-trixie.sh" /bin/bash -euo pipefail -c '
  ROOT=$1 OUT=$2
  command -v aarch64-linux-gnu-g++ >/dev/null || { echo "build-acl-shim: aarch64-linux-gnu-g++ missing in the chroot (g++-aarch64-linux-gnu)" >&2; exit 1; }
  INC=
  for d in /usr/include/aarch64-linux-gnu /usr/include; do
    if [ -f "$d/arm_compute/runtime/NEON/NEFunctions.h" ]; then INC=$d; break; fi
  done
  [ -n "$INC" ] || { echo "build-acl-shim: ACL headers not found (install libarm-compute-dev:arm64)" >&2; exit 1; }
  [ -e /usr/lib/aarch64-linux-gnu/libarm_compute.so ] || { echo "build-acl-shim: /usr/lib/aarch64-linux-gnu/libarm_compute.so missing (libarm-compute-dev:arm64)" >&2; exit 1; }
  aarch64-linux-gnu-g++ -std=c++17 -O2 -fPIC -shared -fvisibility=hidden -fvisibility-inlines-hidden \
    -Wall -Wextra -Wno-unused-parameter \
    -I"$ROOT/runtime/include" -I"$INC" \
    -Wl,--version-script="$ROOT/backends/acl/acl_shim.map" -Wl,--no-undefined -Wl,-soname,libmote_acl.so \
    -o "$OUT/libmote_acl.so" "$ROOT/backends/acl/acl_shim.cpp" \
    -L/usr/lib/aarch64-linux-gnu -larm_compute -lpthread
' build-acl-shim "$ROOT" "$OUT" >&2
[ -f "$OUT/libmote_acl.so" ] || { log "build produced no library"; exit 1; }
echo "$OUT/libmote_acl.so"
