#!/usr/bin/env bash
# Run the workspace's tests for aarch64 Linux under qemu-aarch64, inside the trixie chroot.
#
#   scripts/test-aarch64.sh [EXTRA CARGO TEST ARGS...]   (e.g. -- --nocapture)
#
# 1. Builds (or reuses) the aarch64 model zoo: TVM cross-compiles on the host (scripts/zoo.sh),
#    the chroot's aarch64-linux-gnu-gcc links the libraries. Likewise the offload zoo
#    (partitioned models, scripts/offload-zoo.sh).
# 2. In the chroot (scripts/in-trixie.sh): cargo test $CARGO_ARGS (at opt-level 1, below) with MOTE_ZOO_DIR set; cargo
#    runs the test binaries with qemu-aarch64 (CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER).
# 3. Runs tests/tests/acl_discovery.rs once more with libmote_acl.so on LD_LIBRARY_PATH.
# Exits non-zero on failure.
set -euo pipefail

# mote-rpc's tests drive TVM's Python client, which runs on the host only; the aarch64 server
# is exercised end to end by scripts/test-rpc-phone.sh instead. mote-swift's and
# mote-swift-rpc's Rust tests are the bridges' own (no arithmetic of Mote's): they run on the
# host with the Swift suites, and building uniffi again for aarch64 only costs CI time (their
# Apple builds are scripts/build-xcframework.sh's).
CARGO_ARGS=${MOTE_AARCH64_CARGO_ARGS:-"--target aarch64-unknown-linux-gnu --workspace --exclude mote-cli --exclude mote-rpc --exclude mote-swift --exclude mote-swift-rpc"}

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
ROOT=$(git -C "$HERE" rev-parse --show-toplevel 2>/dev/null || (cd "$HERE/.." && pwd -P))
cd "$ROOT"

log() { echo "test-aarch64: $*" >&2; }

# The tests are built at opt-level 1 (debug assertions and overflow checks stay on, as in the
# dev profile): under qemu the unoptimized build spent 310 s in mote's unit tests alone, 57 s
# at opt-level 1 (2026-11-29). scripts/test-rpc-phone.sh builds its aarch64 CLI the same way,
# so that the two share their dependencies' builds.
OPT1=(env CARGO_PROFILE_DEV_OPT_LEVEL=1 CARGO_PROFILE_TEST_OPT_LEVEL=1)

"$HERE/trixie.sh" >/dev/null

if [ -n "${MOTE_ZOO_DIR_AARCH64:-}" ]; then
  ZOO=$MOTE_ZOO_DIR_AARCH64
else
  log "building/reusing the aarch64 zoo"
  ZOO=$(MOTE_AARCH64_LINK="$ROOT/scripts/in-trixie.sh aarch64-linux-gnu-gcc" \
        "$ROOT/scripts/zoo.sh" --target aarch64 | tail -n 1)
fi
[ -d "$ZOO" ] || { log "zoo dir '$ZOO' does not exist"; exit 1; }
log "zoo: $ZOO"

if [ -n "${MOTE_OFFLOAD_ZOO_DIR_AARCH64:-}" ]; then
  OZOO=$MOTE_OFFLOAD_ZOO_DIR_AARCH64
else
  log "building/reusing the aarch64 offload zoo"
  OZOO=$(MOTE_AARCH64_LINK="$ROOT/scripts/in-trixie.sh aarch64-linux-gnu-gcc" \
         "$ROOT/scripts/offload-zoo.sh" --target aarch64 | tail -n 1)
fi
[ -d "$OZOO" ] || { log "offload zoo dir '$OZOO' does not exist"; exit 1; }
log "offload zoo: $OZOO"

log "building the ACL backend plug-in"
ACL_PLUGIN=$("$ROOT/scripts/build-acl-shim.sh" | tail -n 1)
[ -f "$ACL_PLUGIN" ] || { log "no ACL plug-in at '$ACL_PLUGIN'"; exit 1; }

export MOTE_ZOO_DIR=$ZOO
export MOTE_ACL_PLUGIN=$ACL_PLUGIN
export MOTE_OFFLOAD_ZOO_DIR=$OZOO
# tests/tests/code_free.rs also runs the x86_64 zoo's code-free files here (read as data, they
# are architecture-neutral); it fails when this is unset.
if [ -n "${MOTE_OFFLOAD_ZOO_DIR_X86_64:-}" ]; then
  export MOTE_CODE_FREE_FOREIGN_ZOO_DIR=$MOTE_OFFLOAD_ZOO_DIR_X86_64
else
  log "building/reusing the x86_64 offload zoo (its code-free files run here too)"
  MOTE_CODE_FREE_FOREIGN_ZOO_DIR=$("$ROOT/scripts/offload-zoo.sh" | tail -n 1)
  export MOTE_CODE_FREE_FOREIGN_ZOO_DIR
fi
[ -d "$MOTE_CODE_FREE_FOREIGN_ZOO_DIR" ] || { log "x86_64 offload zoo '$MOTE_CODE_FREE_FOREIGN_ZOO_DIR' does not exist"; exit 1; }
log "cargo test $CARGO_ARGS $*"
# shellcheck disable=SC2086
# The chroot has no OpenCL driver for arm64 (yet): without other arguments the OpenCL layer's
# and the OpenCL zoo's tests (device::opencl, opencl_zoo::; run on the x86_64 host) are left
# out by name.
[ $# -gt 0 ] || set -- -- --skip device::opencl --skip opencl_zoo::
"$HERE/in-trixie.sh" "${OPT1[@]}" cargo test $CARGO_ARGS "$@"

# The run above has no libmote_acl.so on the search path: acl_discovery checks the logged
# fallback to cpu. Again with the plug-in's folder on LD_LIBRARY_PATH: Mote must find it alone.
log "acl discovery with $(dirname "$ACL_PLUGIN") on LD_LIBRARY_PATH"
MOTE_EXPECT_ACL=found MOTE_QEMU_LIBRARY_PATH=$(dirname "$ACL_PLUGIN") "$HERE/in-trixie.sh" "${OPT1[@]}" cargo test --target aarch64-unknown-linux-gnu -p mote-tests \
  --test acl_discovery "$@"
