#!/usr/bin/env bash
# The corrupted-file corpus (docs/fuzzing.md, "Corrupted files"): every model file of the
# x86_64 zoo and offload zoo cut at many points and changed inside its module blob, VM
# executable and offloaded-region descriptions (fuzz/src/corrupt.rs writes the copies), then
# loaded through the CLI and the C ABI. Each copy must load (and run) or give a typed error:
# no signal, no hang, no abort, no panic, no leak.
#
#   scripts/test-corrupt.sh            (MOTE_ZOO_DIR / MOTE_OFFLOAD_ZOO_DIR reused when set)
#
# - CLI: `mote run -f FUNCTION` on every copy (mapped for a `.so`, read as data for a `.tar`),
#   `mote run --code-free` on every `.so` copy too (mapped as data, its region-only weights read
#   from the file when the backends prepare) and `mote inspect --code-free` on every copy, 20 s
#   each: exit status 0, or 1/2 with an
#   `error:` line. A signal, a panic (101), a timeout or any other status fails.
# - C ABI: ffi/tests/c/corrupt_sweep.c loads every copy mapped (`.so`) and as data, three
#   passes in one process (typed errors only; descriptors, mappings and resident memory flat
#   from the first pass to the last), then one pass over every 8th copy under valgrind's
#   memcheck (no invalid access, no definite or indirect leak).
# Prints `corrupt checks: N passed, M failed`; exit status 1 if any failed.
set -uo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
die() { echo "test-corrupt.sh: error: $*" >&2; exit 1; }
for tool in gcc valgrind pkg-config timeout xargs; do
    command -v "$tool" >/dev/null || die "$tool is required and missing"
done
zoo="${MOTE_ZOO_DIR:-$(scripts/zoo.sh --target x86_64 | tail -n 1)}"
ozoo="${MOTE_OFFLOAD_ZOO_DIR:-$(scripts/offload-zoo.sh --target x86_64 | tail -n 1)}"
[ -f "$zoo/manifest.json" ] && [ -f "$ozoo/manifest.json" ] || die "no zoo ($zoo) or offload zoo ($ozoo)"

out="${CARGO_TARGET_DIR:-$root/target}/corrupt-tests"
rm -rf "$out"; mkdir -p "$out"
corpus="$out/corpus"
# shellcheck source=lib/corrupt-corpus.sh
. "$root/scripts/lib/corrupt-corpus.sh"
write_corrupt_corpus "$corpus" "$zoo" "$ozoo" || die "cannot write the corpus"
copies=$(wc -l <"$corpus/corpus.tsv")
[ "$copies" -gt 0 ] || die "the corpus has no copies ($corpus/corpus.tsv): nothing would be checked"

passed=0; failed=0
result() { # NAME STATUS
    if [ "$2" = 0 ]; then passed=$((passed + 1)); echo "corrupt check: $1 ok"
    else failed=$((failed + 1)); echo "corrupt check: $1 FAILED"; fi
}

cargo build --release --locked -p mote-cli >&2 || die "mote did not build"
mote="${CARGO_TARGET_DIR:-$root/target}/release/mote"
# One copy through the CLI: prints a line per invocation that broke the rules.
one() {
    local copy="$1" fn="$2" dir="$3" mote="$4" rc err
    local runs=()
    case "$copy" in
        *.so) runs+=("run -f ${fn/#-/main} $dir/$copy" "run --code-free -f ${fn/#-/main} $dir/$copy") ;;
        *) runs+=("run --code-free -f ${fn/#-/main} $dir/$copy") ;;
    esac
    runs+=("inspect --code-free $dir/$copy")
    for r in "${runs[@]}"; do
        # shellcheck disable=SC2086
        err="$(timeout 20 "$mote" $r 2>&1 >/dev/null)"; rc=$?
        case "$rc" in
            0) ;;
            1|2) [[ "$err" == *"error: "* ]] || echo "BAD $r: exit $rc without an error line: ${err:0:300}" ;;
            124) echo "BAD $r: timed out after 20 s" ;;
            *) echo "BAD $r: exit $rc: ${err:0:300}" ;;
        esac
    done
}
export -f one
echo "test-corrupt.sh: $copies copies through the CLI" >&2
cut -f1,4 "$corpus/corpus.tsv" | tr '\t' ' ' \
    | xargs -P 2 -L 1 bash -c 'one "$0" "$1" "'"$corpus"'" "'"$mote"'"' >"$out/cli.log" 2>&1
# xargs's own status too (pipefail): a copy whose `one` could not run (the function not found,
# bash killed, xargs stopping early) leaves no BAD line but was never checked.
xargs_rc=$?
bad=$(grep -c '^BAD' "$out/cli.log")
[ "$bad" = 0 ] || head -n 20 "$out/cli.log"
[ "$xargs_rc" = 0 ] || { echo "cli: cut | xargs exited $xargs_rc (copies not all checked):"; tail -n 5 "$out/cli.log"; }
echo "cli: $copies copies, $bad broke the rules, xargs exit $xargs_rc"
result cli "$((bad + xargs_rc))"

prefix="$(scripts/ffi-install.sh "$out/prefix" | tail -n 1)" || die "ffi-install.sh failed"
gcc -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -O1 -g ffi/tests/c/corrupt_sweep.c -o "$out/corrupt_sweep" \
    $(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags --libs mote) || die "corrupt_sweep did not build"
"$out/corrupt_sweep" "$corpus" 3 1 >"$out/c.log" 2>&1; rc=$?
tail -n 8 "$out/c.log"
result c-abi "$rc"
valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite,indirect \
    --show-leak-kinds=definite,indirect "$out/corrupt_sweep" "$corpus" 1 8 >"$out/c-valgrind.log" 2>&1; rc=$?
grep -v -e '^--[0-9]*-- ' "$out/c-valgrind.log" | tail -n 6
result c-abi-valgrind "$rc"

echo "corrupt checks: $passed passed, $failed failed"
[ "$failed" = 0 ]
