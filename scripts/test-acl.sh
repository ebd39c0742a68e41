#!/usr/bin/env bash
# Build the ACL backend plug-in (scripts/build-acl-shim.sh) and its C test
# (backends/acl/tests/test_acl_shim.c) for aarch64 inside the trixie chroot, check the exported
# symbols, and run the test under qemu-aarch64.
#
#   scripts/test-acl.sh [OUT_DIR]        (default: <repo>/target/acl)
#
# The last line is "acl checks: N passed, M failed"; exits non-zero on any failure.
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
ROOT=$(cd "$HERE/.." && pwd -P)
OUT=${1:-$ROOT/target/acl}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd -P)
export MOTE_TRIXIE_BINDS="${MOTE_TRIXIE_BINDS:-} $OUT"

pass=0 fail=0
ok() { echo "PASS: $*"; pass=$((pass + 1)); }
ko() { echo "FAIL: $*"; fail=$((fail + 1)); }
finish() { echo "acl checks: $pass passed, $fail failed"; [ "$fail" -eq 0 ]; exit $?; }

if LIB=$("$HERE/build-acl-shim.sh" "$OUT" | tail -n 1) && [ -f "$LIB" ]; then
  ok "built $LIB"
else
  ko "build of libmote_acl.so"; finish
fi

# Exported dynamic symbols: exactly the 9 mote_backend_* functions.
SYMS=$("$HERE/in-trixie.sh" aarch64-linux-gnu-nm -D --defined-only "$LIB" | awk '{print $3}' | sort)
NSYMS=$(printf '%s\n' "$SYMS" | grep -c .)
NMOTE=$(printf '%s\n' "$SYMS" | grep -c '^mote_backend_')
if [ "$NSYMS" -eq 9 ] && [ "$NMOTE" -eq 9 ]; then
  ok "exports exactly 9 symbols, all mote_backend_*"
else
  ko "exports $NSYMS symbols ($NMOTE mote_backend_*): $(echo $SYMS | head -c 400)"
fi

if "$HERE/in-trixie.sh" aarch64-linux-gnu-gcc -std=c11 -O1 -Wall -D_GNU_SOURCE -I"$ROOT/runtime/include" \
     -o "$OUT/test_acl_shim" "$ROOT/backends/acl/tests/test_acl_shim.c" -ldl -lpthread -lm; then
  ok "built test_acl_shim"
else
  ko "build of test_acl_shim"; finish
fi

LOG="$OUT/test_acl_shim.log"
"$HERE/in-trixie.sh" qemu-aarch64 -L /usr/aarch64-linux-gnu -E LD_LIBRARY_PATH=/usr/lib/aarch64-linux-gnu \
  "$OUT/test_acl_shim" "$LIB" >"$LOG" 2>&1
rc=$?
grep -v '^acl checks:' "$LOG"
last=$(grep '^acl checks:' "$LOG" | tail -n 1)
if [[ $last =~ ([0-9]+)\ passed,\ ([0-9]+)\ failed ]]; then
  pass=$((pass + BASH_REMATCH[1])); fail=$((fail + BASH_REMATCH[2]))
  [ "$rc" -eq 0 ] || [ "${BASH_REMATCH[2]}" -ne 0 ] || ko "test_acl_shim exited with $rc"
else
  ko "test_acl_shim did not finish (exit $rc)"
fi
finish
