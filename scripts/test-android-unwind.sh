#!/usr/bin/env bash
# Does the Android JNI library's unwinder unwind Rust panics? Nothing here runs Android code,
# so the same unwinder archive (bindings-java/android/unwind: the `unwinding` crate, built
# exactly as scripts/build-android-so.sh builds it, for the Linux target of the same
# architecture) replaces libgcc_s in a test program (bindings-java/android/unwind/check),
# which then panics 2,001 times through call chains with destructors and checks each
# catch_unwind, payload and destructor order. Run natively (x86_64) and under qemu (aarch64),
# in the trixie chroot.
#
#   scripts/test-android-unwind.sh
#
# Also checked: the program defines `_Unwind_RaiseException` itself and has no NEEDED
# libgcc_s (so the archive's unwinder is the one that ran).
# Prints "android unwind checks: N passed, M failed"; exits non-zero if any failed.
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
ROOT=$(cd "$HERE/.." && pwd -P)
# The unwinder is built where scripts/build-android-so.sh builds it (scripts/in-trixie.sh).
TRIXIE_TARGET=${MOTE_TRIXIE_TARGET:-${MOTE_CACHE:-$HOME/.cache/mote}/target-trixie}
cd "$ROOT"

# shellcheck source=lib/checks.sh
. "$HERE/lib/checks.sh"

OUT="$ROOT/target/android-unwind"
mkdir -p "$OUT"
for pair in "x86_64-unknown-linux-gnu x86_64-linux-gnu" "aarch64-unknown-linux-gnu aarch64-linux-gnu"; do
  read -r triple gnu <<<"$pair"
  arch=${triple%%-*}
  lib="$TRIXIE_TARGET/unwind/$triple/release/libmote_android_unwind.a"
  if ! (cd bindings-java/android/unwind && "$HERE/in-trixie.sh" env RUSTC_BOOTSTRAP=1 CARGO_TARGET_DIR="$TRIXIE_TARGET/unwind" \
        cargo build --locked --release -Zbuild-std=core,compiler_builtins --target "$triple") >"$OUT/$arch-archive.log" 2>&1; then
    tail -n 20 "$OUT/$arch-archive.log"
    check "$arch: unwinder archive built" 1; continue
  fi
  # The linker rustc calls: the target's gcc, with libgcc_s swapped for the archive.
  wrap="$OUT/$arch-cc.sh"  # a name rustc reads as a C compiler driver, not as ld
  cat >"$wrap" <<EOF
#!/bin/bash
args=()
for a in "\$@"; do
  case "\$a" in
    -lgcc_s) args+=("$lib") ;;
    *) args+=("\$a") ;;
  esac
done
exec $gnu-gcc "\${args[@]}"
EOF
  chmod +x "$wrap"
  env_name="CARGO_TARGET_$(tr 'a-z-' 'A-Z_' <<<"$triple")_LINKER"
  if ! (cd bindings-java/android/unwind/check && "$HERE/in-trixie.sh" env "$env_name=$wrap" \
        CARGO_TARGET_DIR="$ROOT/target/trixie-unwind-check" cargo build --locked --release --target "$triple") \
        >"$OUT/$arch-check.log" 2>&1; then
    tail -n 20 "$OUT/$arch-check.log"
    check "$arch: check program linked with the archive" 1; continue
  fi
  bin="$ROOT/target/trixie-unwind-check/$triple/release/unwind-check"
  syms=$("$HERE/in-trixie.sh" "$gnu-nm" "$bin" 2>/dev/null)
  needed=$("$HERE/in-trixie.sh" "$gnu-readelf" -d "$bin" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
  if grep -qE ' T _Unwind_RaiseException$' <<<"$syms" && ! grep -q libgcc_s <<<"$needed"; then
    check "$arch: the program's unwinder is the archive's" 0 "_Unwind_RaiseException defined; NEEDED: $needed"
  else
    check "$arch: the program's unwinder is the archive's" 1 "NEEDED: $needed"
  fi
  if [ "$arch" = aarch64 ]; then
    run=("$HERE/in-trixie.sh" qemu-aarch64 -L /usr/aarch64-linux-gnu "$bin")
  else
    run=("$HERE/in-trixie.sh" "$bin")
  fi
  res=$("${run[@]}" 2>&1); rc=$?
  echo "$res" | tail -n 3
  check "$arch: 2001 panics unwound and caught" "$( [ $rc = 0 ] && grep -qx 'unwind check: 2001 panics caught' <<<"$res"; echo $?)" "exit $rc"
done

checks_summary "android unwind"
