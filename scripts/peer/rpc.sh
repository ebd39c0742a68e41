#!/usr/bin/env bash
# Run apache/tvm's own RPC tests, unchanged, against TVM's Python server and against
# `mote rpc serve`, and print the outcomes side by side (issue 29, item 3; docs/rpc.md, "Tests").
#
#   scripts/peer/rpc.sh --tvm-src DIR [--debug] [-k EXPR]
#
# DIR is a checkout of apache/tvm (e.g. `git worktree add` from a mirror of it). The tests run
# from there, unchanged and uncopied: tests/python/runtime/test_runtime_rpc.py, the `*_rpc` tests
# of tests/python/relax/test_vm_build.py, and tests/python/contrib/test_rpc_tracker.py (found by
# name under tests/python), with pytest from the TVM 0.27 venv (scripts/venv.sh). The second run
# loads rpc/tests/peer/mote_server_plugin.py, which replaces the server TVM starts
# (`tvm.rpc.Server`) by `mote rpc serve` (target/release/mote, built here; --debug: target/debug).
# -k EXPR is passed to both pytest runs.
#
# The last line is the summary:
#   peer rpc: N passed, M failed, K not applicable (TVM's server: ...)
# counting Mote's outcomes; a test that fails on both servers is counted as shared, not as a Mote
# failure, and the tests the plug-in lists as not applicable are counted apart with their reason.
# Exit status: 0 when every failure on Mote is shared with TVM's server or listed as known
# (KNOWN_FAILING in the plug-in), 1 otherwise, 2 on a usage or setup error.
set -euo pipefail

die() { echo "peer/rpc.sh: error: $*" >&2; exit 2; }
log() { echo "peer/rpc.sh: $*" >&2; }

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
tvm_src="" profile=release kexpr=""
while [ $# -gt 0 ]; do
    case "$1" in
        --tvm-src) [ $# -ge 2 ] || die "--tvm-src needs a folder"; tvm_src="$2"; shift 2 ;;
        --debug) profile=debug; shift ;;
        -k) [ $# -ge 2 ] || die "-k needs an expression"; kexpr="$2"; shift 2 ;;
        -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
        *) die "unknown argument '$1' (usage: scripts/peer/rpc.sh --tvm-src DIR [--debug] [-k EXPR])" ;;
    esac
done
[ -n "$tvm_src" ] || die "--tvm-src DIR is required (a checkout of apache/tvm)"
[ -d "$tvm_src/tests/python" ] || die "'$tvm_src' is not a checkout of apache/tvm (no tests/python)"
tvm_src="$(cd "$tvm_src" && pwd)"
case "$tvm_src/" in
    "$root"/*) die "the TVM checkout must live outside this repository (its tests are Apache's)" ;;
esac

find_test() {
    local hits
    hits="$(find "$tvm_src/tests/python" -name "$1" -type f | sort)"
    [ -n "$hits" ] || die "no $1 under $tvm_src/tests/python"
    [ "$(printf '%s\n' "$hits" | wc -l)" -eq 1 ] || die "several $1 under $tvm_src/tests/python: $hits"
    printf '%s\n' "$hits"
}
t_rpc="$(find_test test_runtime_rpc.py)"
t_vm="$(find_test test_vm_build.py)"
t_tracker="$(find_test test_rpc_tracker.py)"

venv="$("$root/scripts/venv.sh" | tail -n 1)" || die "scripts/venv.sh failed"
python="$venv/bin/python"
"$python" -c 'import pytest, tvm' 2>/dev/null || die "$python cannot import pytest and tvm"

log "building mote ($profile)"
cargo_flags=()
[ "$profile" = release ] && cargo_flags+=(--release)
(cd "$root" && cargo build -q "${cargo_flags[@]}" --bin mote) >&2 || die "cargo build failed"
mote="$root/target/$profile/mote"
[ -x "$mote" ] || die "no $mote after the build"

work="$(mktemp -d /tmp/peer-rpc.XXXXXX)"
trap 'rm -rf "$work"' EXIT

# All of test_runtime_rpc.py and test_rpc_tracker.py; of test_vm_build.py the tests named *_rpc
# (a -k keyword matches the module name too, so the other two files pass "not test_vm_build").
select="not test_vm_build or _rpc"
[ -n "$kexpr" ] && select="($select) and ($kexpr)"

run_pytest() { # NAME [env assignments...]
    local name="$1"; shift
    log "running TVM's RPC tests against $name's server"
    # No bytecode and no cache in the checkout; run from an empty folder so nothing lands there.
    (cd "$work" && env PYTHONDONTWRITEBYTECODE=1 PYTHONPATH="$root/rpc/tests/peer" \
        MOTE_PEER_RESULTS="$work/$name.jsonl" "$@" \
        timeout 1800 "$python" -m pytest -p mote_server_plugin -p no:cacheprovider \
        --rootdir "$tvm_src" -q -rN --tb=line -o addopts= -k "$select" \
        "$t_rpc" "$t_vm" "$t_tracker") >"$work/$name.log" 2>&1 || true
    [ -s "$work/$name.jsonl" ] || { tail -n 40 "$work/$name.log" >&2; die "no test ran against $name's server"; }
}
run_pytest tvm
run_pytest mote MOTE_RPC_SERVER_BIN="$mote"

PYTHONDONTWRITEBYTECODE=1 PYTHONPATH="$root/rpc/tests/peer" "$python" - "$work/tvm.jsonl" "$work/mote.jsonl" "$tvm_src" <<'EOF'
import json, sys
import mote_server_plugin as plugin

def load(path):
    rank = {"passed": 0, "skipped": 1, "failed": 2}
    out = {}
    for line in open(path, encoding="utf-8"):
        r = json.loads(line)
        old = out.get(r["id"])
        if old is None or rank[r["outcome"]] >= rank[old["outcome"]]:
            out[r["id"]] = r
    return out

tvm, mote, src = load(sys.argv[1]), load(sys.argv[2]), sys.argv[3]
ids = sorted(set(tvm) | set(mote))
missing = {"outcome": "not run", "message": ""}
counts = {"passed": 0, "failed": 0, "na": 0, "skipped": 0, "shared": 0, "known": 0}
tvm_counts = {"passed": 0, "failed": 0, "skipped": 0, "not run": 0}
unexplained = 0
width = max(len(i) for i in ids)
print(f"{'test':<{width}}  {'TVM':<7}  {'Mote':<7}  verdict")
for i in ids:
    t, m = tvm.get(i, missing), mote.get(i, missing)
    tvm_counts[t["outcome"]] += 1
    na, known = plugin.not_applicable(i), plugin.known_failing(i)
    if na:
        counts["na"] += 1
        verdict = f"not applicable: {na}"
        if m["outcome"] == "passed":
            verdict += " (yet it passed on Mote: check the list)"
    elif m["outcome"] == "passed" and known:
        # A test that expects an error passes on the refusal itself: not a pass.
        counts["failed"] += 1
        counts["known"] += 1
        verdict = f"failed: {known} (the test expects an error, and got the refusal)"
    elif m["outcome"] == "passed":
        counts["passed"] += 1
        verdict = "passed"
    elif m["outcome"] == "skipped":
        counts["skipped"] += 1
        verdict = f"skipped: {m['message']}"
    elif t["outcome"] == "failed":
        counts["shared"] += 1
        verdict = f"shared failure (fails on TVM's server too): {m['message']}"
    elif known:
        counts["failed"] += 1
        counts["known"] += 1
        verdict = f"failed: {known} ({m['message']})"
    else:
        counts["failed"] += 1
        unexplained += 1
        verdict = f"FAILED on Mote only: {m['message']}"
    print(f"{i:<{width}}  {t['outcome']:<7}  {m['outcome']:<7}  {verdict}")
extra = []
if counts["skipped"]:
    extra.append(f"{counts['skipped']} skipped")
if counts["shared"]:
    extra.append(f"{counts['shared']} failing on both servers")
known = f" ({counts['known']} known)" if counts["known"] else ""
tvm_line = f"{tvm_counts['passed']} passed, {tvm_counts['failed']} failed"
if tvm_counts["skipped"]:
    tvm_line += f", {tvm_counts['skipped']} skipped"
print(f"peer rpc: {counts['passed']} passed, {counts['failed']} failed{known}, "
      f"{counts['na']} not applicable" + "".join(", " + e for e in extra)
      + f" (TVM's server: {tvm_line})")
sys.exit(1 if unexplained else 0)
EOF
