#!/usr/bin/env bash
# The crafted attack files of issue 27 (docs/untrusted-models.md): python/crafted.py writes
# zero-sized offloaded regions, gzip bombs, a 2^20-register recursion, an endless loop, a deep
# recursion, an 8 MB ELF of blob symbols, and truncations of the valid ones, with a manifest of
# what each must give. Each goes through
#   (a) `mote run --code-free` (tests/crafted/check.py): exit status (3 for a budget, 1 for
#       another error, 0 for the control files), the message, a wall-time and a peak-RSS bound
#       per file (os.wait4's accounting of the child);
#   (b) the C ABI (tests/crafted/crafted_load.c, code-free, default budgets): the error code;
#   (c) a code-free `mote rpc serve` driven by TVM 0.27's Python client (tests/crafted/
#       rpc_client.py): a remote error for each, then a code-free offload-zoo model still runs
#       and matches its reference.
# Prints `crafted checks: N passed, M failed`; exit status 1 if any failed or none ran.
set -uo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
die() { echo "test-crafted.sh: error: $*" >&2; exit 1; }
for tool in gcc pkg-config python3 timeout; do
    command -v "$tool" >/dev/null || die "$tool is required and missing"
done
venv="$(scripts/venv.sh | tail -n 1)" || die "no Python venv"
[ -x "$venv/bin/python" ] || die "no venv python at $venv"
ozoo="${MOTE_OFFLOAD_ZOO_DIR:-$(scripts/offload-zoo.sh --target x86_64 | tail -n 1)}"
[ -f "$ozoo/manifest.json" ] || die "no offload zoo ($ozoo)"

out="${CARGO_TARGET_DIR:-$root/target}/crafted-tests"
rm -rf "$out"; mkdir -p "$out"
files="$out/files"
python3 python/crafted.py "$files" >&2 || die "crafted.py failed"

cargo build --release --locked -p mote-cli >&2 || die "mote did not build"
mote="${CARGO_TARGET_DIR:-$root/target}/release/mote"
prefix="$(scripts/ffi-install.sh "$out/prefix" | tail -n 1)" || die "ffi-install.sh failed"
gcc -std=c11 -Wall -Wextra -Werror -O1 -g tests/crafted/crafted_load.c -o "$out/crafted_load" \
    $(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags --libs mote) \
    -Wl,-rpath,"$prefix/lib" || die "crafted_load did not build"

passed=0; failed=0
tally() { # LOG: add its per-file lines to the counts
    passed=$((passed + $(grep -c '^crafted check: .* ok (' "$1")))
    failed=$((failed + $(grep -c '^crafted check: .* FAILED (' "$1")))
}
python3 tests/crafted/check.py cli "$mote" "$files" >"$out/cli.log" 2>&1; rc=$?
cat "$out/cli.log"; tally "$out/cli.log"
[ "$rc" = 0 ] || grep -q FAILED "$out/cli.log" || { failed=$((failed + 1)); echo "crafted check: cli runner exited $rc"; }
python3 tests/crafted/check.py c "$out/crafted_load" "$files" >"$out/c.log" 2>&1; rc=$?
cat "$out/c.log"; tally "$out/c.log"
[ "$rc" = 0 ] || grep -q FAILED "$out/c.log" || { failed=$((failed + 1)); echo "crafted check: c runner exited $rc"; }

# (c) The RPC server, code-free, on a free port; stopped (by its pid) whatever happens.
"$mote" rpc serve --code-free --port 0 >"$out/rpc-server.log" 2>&1 &
server=$!
trap 'kill "$server" 2>/dev/null' EXIT
port=""
for _ in $(seq 100); do
    port="$(grep -oE 'listening on [0-9.]+:[0-9]+' "$out/rpc-server.log" | head -n 1 | sed 's/.*://')"
    [ -n "$port" ] && break
    sleep 0.1
done
if [ -z "$port" ]; then
    failed=$((failed + 1)); echo "crafted check: rpc server did not start"; cat "$out/rpc-server.log"
else
    timeout 600 "$venv/bin/python" tests/crafted/rpc_client.py "$port" "$files" "$ozoo" >"$out/rpc.log" 2>&1; rc=$?
    cat "$out/rpc.log"; tally "$out/rpc.log"
    [ "$rc" = 0 ] || grep -q FAILED "$out/rpc.log" || { failed=$((failed + 1)); echo "crafted check: rpc client exited $rc"; tail -n 20 "$out/rpc.log"; }
    kill -0 "$server" 2>/dev/null || { failed=$((failed + 1)); echo "crafted check: rpc server died"; tail -n 20 "$out/rpc-server.log"; }
fi

echo "crafted checks: $passed passed, $failed failed"
[ "$failed" = 0 ] && [ "$passed" -gt 0 ]
