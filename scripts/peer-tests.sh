#!/usr/bin/env bash
# Peers' own tests against Mote (issue 29; not part of CI: they need a checkout of apache/tvm,
# whose tests are Apache's and are never copied into this repository):
#
#   scripts/peer-tests.sh --tvm-src DIR [--only java|rpc]
#
#   - tvm4j's JUnit tests (newest and v0.21.0), changed only in their package, against
#     org.mote.tvm4j (scripts/peer/java.sh), which also regenerates docs/tvm4j-compat.md: every
#     public tvm4j member as same, different or missing in org.mote.tvm4j, from both jars;
#   - TVM's RPC tests, unchanged, against TVM's Python server and against `mote rpc serve`
#     (scripts/peer/rpc.sh).
#
# DIR is a checkout of apache/tvm with its tags (for v0.21.0's tests), e.g. a worktree of a
# mirror. Each part prints its own summary line; the last line sums them up:
#   peer tests: java <...>; rpc <...>
# Exit status: non-zero when either part failed (a known or shared RPC failure does not count).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
src="" only=""
while [ $# -gt 0 ]; do
    case "$1" in
        --tvm-src) [ $# -ge 2 ] || { echo "peer-tests.sh: --tvm-src needs a folder" >&2; exit 2; }; src="$2"; shift 2 ;;
        --only) [ $# -ge 2 ] || { echo "peer-tests.sh: --only java|rpc" >&2; exit 2; }; only="$2"; shift 2 ;;
        -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
        *) echo "peer-tests.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done
[ -n "$src" ] || { echo "peer-tests.sh: --tvm-src DIR is required (a checkout of apache/tvm)" >&2; exit 2; }
case "$only" in ""|java|rpc) ;; *) echo "peer-tests.sh: --only java|rpc" >&2; exit 2 ;; esac
status=0 java="not run" rpc="not run"
if [ "$only" != rpc ]; then
    out="$("$here/peer/java.sh" --tvm-src "$src" --compat-out "$root/docs/tvm4j-compat.md")" || status=1
    java="$(printf '%s\n' "$out" | tail -n 1 | sed 's/^peer java: //')"
    printf '%s\n' "$out"
fi
if [ "$only" != java ]; then
    out="$("$here/peer/rpc.sh" --tvm-src "$src")" || status=1
    rpc="$(printf '%s\n' "$out" | tail -n 1 | sed 's/^peer rpc: //')"
    printf '%s\n' "$out"
fi
echo "peer tests: java $java; rpc $rpc"
exit "$status"
