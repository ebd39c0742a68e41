#!/usr/bin/env bash
# Swift binding tests: build libmote_swift, check the generated bindings, run `swift test`.
#
#   MOTE_ZOO_DIR=... MOTE_OFFLOAD_ZOO_DIR=... MOTE_OPENCL_ZOO_DIR=... MOTE_PYTHON=... scripts/test-swift.sh
#
# 1. `cargo build -p mote-swift --features bindgen` on the host (the host's Rust: the library
#    links only glibc symbols older than trixie's glibc, so the chroot's Swift links and runs it;
#    building it in the chroot would cost a second cold build of the same code with Rust 1.85,
#    whose check-mobile pass already covers the minimum version).
# 2. scripts/swift-bindings.sh --check: the checked-in Swift and C headers match the libraries
#    (mote-swift's and mote-swift-rpc's, both built by it); libmote_swift (built without the
#    `test-hooks` feature, as apps get it) exports no test hook and no RPC server (`nm -D`: the
#    server is the product MoteRPC's, docs/swiftpm.md "Two products"); then the `test-hooks` build and its bindings in target/swift-test-hooks, which
#    the package's tests compile against (MOTE_SWIFT_TEST_HOOKS_DIR; docs/uniffi.md).
# 3. `swift test` (XCTest, Swift 6.0.3) in the trixie chroot (scripts/in-trixie.sh), linking
#    target/debug/libmote_swift.so (MOTE_SWIFT_LIB_DIR). The RPCServer's tests are not here:
#    they run in scripts/test-ios-app.sh (ios-app/Tests/MoteRPCTests), whose package links
#    libmote_swift_rpc alone (one test process never links both libraries). Tests may run
#    MOTE_PYTHON from inside the chroot: the venv's python links to an interpreter installed
#    outside the venv (pyenv), so that installation's folder is bound into the chroot too.
#    CorruptFilesTests sweeps the corrupted-file corpus at MOTE_CORRUPT_DIR; when that is unset
#    the corpus is written into target/swift-corrupt from MOTE_ZOO_DIR and MOTE_OFFLOAD_ZOO_DIR
#    (scripts/lib/corrupt-corpus.sh, as scripts/test-corrupt.sh writes it). OpenClTests load
#    MOTE_OPENCL_ZOO_DIR/mlp_cl.so: the chroot has no libOpenCL, so its session must throw
#    MoteError.device naming it.
# Ends with `swift checks: N passed, M failed` (N: XCTest cases that passed).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
# shellcheck source=lib/swift-common.sh
. "$HERE/lib/swift-common.sh"
ROOT=$(git -C "$HERE" rev-parse --show-toplevel 2>/dev/null || (cd "$HERE/.." && pwd -P))
cd "$ROOT"

missing=()
[ -n "${MOTE_ZOO_DIR:-}" ] && [ -f "${MOTE_ZOO_DIR}/manifest.json" ] || missing+=("MOTE_ZOO_DIR (the x86_64 zoo: \`scripts/zoo.sh | tail -1\`)")
[ -n "${MOTE_OFFLOAD_ZOO_DIR:-}" ] && [ -f "${MOTE_OFFLOAD_ZOO_DIR}/manifest.json" ] || missing+=("MOTE_OFFLOAD_ZOO_DIR (the x86_64 offload zoo: \`scripts/offload-zoo.sh | tail -1\`)")
[ -n "${MOTE_OPENCL_ZOO_DIR:-}" ] && [ -f "${MOTE_OPENCL_ZOO_DIR}/mlp_cl.so" ] || missing+=("MOTE_OPENCL_ZOO_DIR (the OpenCL zoo: \`scripts/opencl-zoo.sh | tail -1\`; the chroot has no libOpenCL, and OpenClTests expect the Device error)")
[ -n "${MOTE_PYTHON:-}" ] && [ -x "${MOTE_PYTHON}" ] || missing+=("MOTE_PYTHON (the TVM 0.27 venv's python: \`scripts/venv.sh\`)")
if [ ${#missing[@]} -gt 0 ]; then
  for m in "${missing[@]}"; do echo "test-swift: set $m" >&2; done
  echo "swift checks: 0 passed, 1 failed"
  exit 1
fi

log=$(mktemp)
trap 'rm -f "$log"' EXIT
fail() { echo "test-swift: $*" >&2; echo "swift checks: ${passed:-0} passed, $(( ${failed:-0} + 1 )) failed"; exit 1; }

echo "=== test-swift: cargo build -p mote-swift --features bindgen ===" >&2
cargo build --locked -p mote-swift --features bindgen >&2 || fail "cargo build failed"
echo "=== test-swift: scripts/swift-bindings.sh --check ===" >&2
"$HERE/swift-bindings.sh" --check || fail "generated bindings drifted (run scripts/swift-bindings.sh)"
# The library as apps get it (built above without `test-hooks`) exports no test hook.
lib="${CARGO_TARGET_DIR:-$ROOT/target}/debug/libmote_swift.so"
hooks_in_release=$(nm -D --defined-only "$lib" | grep -c 'for_test' || true)
[ "$hooks_in_release" = 0 ] || fail "$lib (no test-hooks feature) exports $hooks_in_release test hooks"
echo "test-swift: $lib exports no test hook" >&2
# Nor the RPC server (mote-swift-rpc's): no uniffi export of it, no symbol of mote_rpc.
rpc_in_mote=$(nm --defined-only "$lib" | grep -ci 'nativerpcserver\|8mote_rpc' || true)
[ "$rpc_in_mote" = 0 ] || fail "$lib exports $rpc_in_mote symbols of the RPC server (it belongs to mote-swift-rpc)"
rpc_lib="${CARGO_TARGET_DIR:-$ROOT/target}/debug/libmote_swift_rpc.so"
[ "$(nm -D --defined-only "$rpc_lib" | grep -c 'uniffi_mote_swift_rpc_fn_constructor_nativerpcserver_start' || true)" = 1 ] ||
  fail "$rpc_lib does not export the RPC server's constructor"
echo "test-swift: $lib exports no RPC server; $rpc_lib does" >&2
# The tests' library and bindings: a `test-hooks` build, its bindings generated into a folder
# inside the package (SwiftPM's targets must be), which Package.swift's Linux branch takes
# from MOTE_SWIFT_TEST_HOOKS_DIR (docs/uniffi.md, "Test hooks").
hooks_dir="${CARGO_TARGET_DIR:-$ROOT/target}/swift-test-hooks"
case "$hooks_dir" in
  "$ROOT"/*) hooks_rel=${hooks_dir#"$ROOT"/} ;;
  *) fail "CARGO_TARGET_DIR must be inside $ROOT for the test-hooks bindings (SwiftPM targets live in the package)" ;;
esac
echo "=== test-swift: the test-hooks build and its bindings ===" >&2
"$HERE/swift-bindings.sh" --test-hooks "$hooks_dir" || fail "cannot generate the test-hooks bindings"

# The corrupted-file corpus (docs/fuzzing.md, "Corrupted files") for CorruptFilesTests.
if [ -z "${MOTE_CORRUPT_DIR:-}" ]; then
  echo "=== test-swift: writing the corrupted-file corpus ===" >&2
  # shellcheck source=lib/corrupt-corpus.sh
  . "$HERE/lib/corrupt-corpus.sh"
  MOTE_CORRUPT_DIR="${CARGO_TARGET_DIR:-$ROOT/target}/swift-corrupt"
  write_corrupt_corpus "$MOTE_CORRUPT_DIR" "$MOTE_ZOO_DIR" "$MOTE_OFFLOAD_ZOO_DIR" || fail "cannot write the corrupted-file corpus"
fi
[ -f "$MOTE_CORRUPT_DIR/corpus.tsv" ] || fail "MOTE_CORRUPT_DIR=$MOTE_CORRUPT_DIR has no corpus.tsv"
MOTE_CORRUPT_DIR=$(cd "$MOTE_CORRUPT_DIR" && pwd -P)
export MOTE_CORRUPT_DIR
echo "test-swift: $(wc -l <"$MOTE_CORRUPT_DIR/corpus.tsv") corrupted copies in $MOTE_CORRUPT_DIR" >&2

# The interpreter behind the venv's python, bound into the chroot at the same path, and the
# corpus (when it is outside what the chroot sees anyway).
binds="$(python_binds "$MOTE_PYTHON") $MOTE_CORRUPT_DIR $MOTE_OPENCL_ZOO_DIR"

# The zoo's system-library objects in one archive, linked whole into the test executable
# (docs/system-lib.md): the static-model tests load them by prefix.
syslib_dir="${CARGO_TARGET_DIR:-$ROOT/target}/swift-syslib"
zoo_syslib_archive "$syslib_dir" "$MOTE_ZOO_DIR" "$MOTE_PYTHON" || fail "cannot link the zoo's system libraries"

echo "=== test-swift: swift test (trixie chroot) ===" >&2
set +e
MOTE_SWIFT_LIB_DIR="${CARGO_TARGET_DIR:-$ROOT/target}/debug" MOTE_PYTHON="$MOTE_PYTHON" \
MOTE_SWIFT_TEST_HOOKS_DIR="$hooks_rel" \
MOTE_TRIXIE_BINDS="${MOTE_TRIXIE_BINDS:-} $binds" \
  "$HERE/in-trixie.sh" sh -c 'swift test -Xlinker --whole-archive \
    -Xlinker "$0" -Xlinker --no-whole-archive -Xlinker -lm 2>&1' "$syslib_dir/libzoo_syslib.a" | tee "$log" >&2
rc=${PIPESTATUS[0]}
set -e
# Counted wherever they stand in a line: the panic test's backtrace (stderr) can run into
# XCTest's line (seen: 27 counted of 28 executed, the line preceded by indentation or by the
# backtrace's last source path).
passed=$( (grep -oE "Test Case '[^']+' passed" "$log" || true) | wc -l)
failed=$( (grep -oE "Test Case '[^']+' failed" "$log" || true) | wc -l)
if [ "$rc" != 0 ] && [ "$failed" = 0 ]; then failed=1; fi   # a crash or build failure
if [ "$passed" = 0 ]; then failed=$(( failed + 1 )); fi    # nothing ran: never a pass
echo "swift checks: $passed passed, $failed failed"
[ "$failed" = 0 ]
