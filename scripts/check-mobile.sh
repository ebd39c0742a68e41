#!/usr/bin/env bash
# Type-check the runtime for mobile/Apple targets inside the trixie chroot (scripts/in-trixie.sh).
#
#   scripts/check-mobile.sh [EXTRA CARGO ARGS...]
#
# Runs, for each target below:
#   RUSTC_BOOTSTRAP=1 cargo check -Zbuild-std=std,panic_abort --target T $PACKAGES
# with trixie's Rust 1.85 + rust-src (the standard library is built from source; its crates.io
# dependencies are fetched once into $MOTE_CACHE/cargo-trixie). Linking is not possible for
# these targets here (no Apple SDK, no NDK): this is `check` only.
# Prints PASS/FAIL per target; exits non-zero if any target fails.
set -euo pipefail

# Packages to check (cargo -p flags). Override with MOTE_MOBILE_PACKAGES.
PACKAGES=${MOTE_MOBILE_PACKAGES:-"-p mote -p mote-ffi -p mote-rpc -p mote-swift -p mote-swift-rpc"}
# Targets to check. Override with MOTE_MOBILE_TARGETS (space-separated; the Apple targets
# aarch64-apple-ios and aarch64-apple-darwin work too). By default only Android: CI builds the
# Apple targets for real (scripts/build-xcframework.sh compiles mote, mote-ffi, mote-rpc,
# mote-swift and mote-swift-rpc for iOS, the simulator and macOS), which checks more than
# `check` and made these checks a second, slower pass over the same code.
TARGETS=${MOTE_MOBILE_TARGETS:-"aarch64-linux-android"}

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
ROOT=$(git -C "$HERE" rev-parse --show-toplevel 2>/dev/null || (cd "$HERE/.." && pwd -P))
cd "$ROOT"

"$HERE/trixie.sh" >/dev/null   # build the chroot first, so its progress isn't mixed into a target

failed=()
results=()
for t in $TARGETS; do
  echo "=== check-mobile: $t ===" >&2
  start=$(date +%s)
  # shellcheck disable=SC2086
  if "$HERE/in-trixie.sh" env RUSTC_BOOTSTRAP=1 \
      cargo check -Zbuild-std=std,panic_abort --target "$t" $PACKAGES "$@"; then
    results+=("PASS $t ($(( $(date +%s) - start )) s)")
  else
    results+=("FAIL $t ($(( $(date +%s) - start )) s)")
    failed+=("$t")
  fi
done

echo "=== check-mobile summary ==="
for r in "${results[@]}"; do echo "check-mobile: $r"; done
if [ ${#failed[@]} -gt 0 ]; then
  echo "check-mobile: FAILED: ${failed[*]}"
  exit 1
fi
echo "check-mobile: all ${#results[@]} targets passed"
