#!/usr/bin/env bash
# Run a command inside the Debian trixie chroot (built on demand by scripts/trixie.sh).
#
#   scripts/in-trixie.sh CMD [ARGS...]
#
# - The project checkout (git toplevel of this script) and $MOTE_CACHE are bind-mounted at the
#   same absolute paths inside, as are /tmp, /dev, /proc and /sys; the working directory is kept.
# - All mounts live in a private mount namespace: they vanish when CMD ends.
# - Inside: trixie's Rust 1.85 with CARGO_HOME=$MOTE_CACHE/cargo-trixie and
#   CARGO_TARGET_DIR=$MOTE_TRIXIE_TARGET (default $MOTE_CACHE/target-trixie: kept between
#   checkouts, so a fresh clone reuses the standard library that -Zbuild-std built and the
#   dependencies; cargo's fingerprints decide what is rebuilt: scripts/test.sh runs in one work
#   copy at a fixed path, so only what changed since its last run is), aarch64 cross linker +
#   qemu-aarch64 runner. Two checkouts
#   building at the same time share its output files: run one at a time.
# - Also bound: MOTE_ZOO_DIR and the directories in MOTE_TRIXIE_BINDS, if outside those.
# - Passed through: MOTE_*, CI*, RUST_BACKTRACE, RUST_LOG, RUST_TEST_THREADS, TERM, NO_COLOR,
#   CARGO_TERM_*, proxies; plus any names listed in MOTE_TRIXIE_ENV (space-separated).
# - MOTE_QEMU_LIBRARY_PATH: directories appended to the LD_LIBRARY_PATH of programs run under
#   qemu-aarch64 (the host's LD_LIBRARY_PATH does not reach them).
# - Exit code = CMD's exit code.
set -euo pipefail

[ $# -ge 1 ] || { echo "usage: $0 CMD [ARGS...]" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "in-trixie: must run as root" >&2; exit 1; }

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
ROOT=$(git -C "$HERE" rev-parse --show-toplevel 2>/dev/null || true)
[ -n "$ROOT" ] || ROOT=$(cd "$HERE/.." && pwd -P)
ROOT=$(cd "$ROOT" && pwd -P)

export MOTE_CACHE=${MOTE_CACHE:-$HOME/.cache/mote}
mkdir -p "$MOTE_CACHE"
MOTE_CACHE=$(cd "$MOTE_CACHE" && pwd -P)

TRIXIE_TARGET=${MOTE_TRIXIE_TARGET:-$MOTE_CACHE/target-trixie}
mkdir -p "$TRIXIE_TARGET"

CHROOT=$("$HERE/trixie.sh" | tail -n 1)
[ -d "$CHROOT" ] || { echo "in-trixie: no chroot at '$CHROOT'" >&2; exit 1; }

CWD=$(pwd -P)

# Environment inside the chroot.
ENVS=(
  "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
  "HOME=/root"
  "LANG=C.UTF-8"
  "MOTE_CACHE=$MOTE_CACHE"
  "MOTE_ROOT=$ROOT"
  "CARGO_HOME=$MOTE_CACHE/cargo-trixie"
  "CARGO_TARGET_DIR=$TRIXIE_TARGET"
  "CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc"
  "CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER=qemu-aarch64 -L /usr/aarch64-linux-gnu -E LD_LIBRARY_PATH=/usr/lib/aarch64-linux-gnu${MOTE_QEMU_LIBRARY_PATH:+:$MOTE_QEMU_LIBRARY_PATH}"
  "CC_aarch64_unknown_linux_gnu=aarch64-linux-gnu-gcc"
  "CXX_aarch64_unknown_linux_gnu=aarch64-linux-gnu-g++"
  "AR_aarch64_unknown_linux_gnu=aarch64-linux-gnu-ar"
)
pass_re='^(MOTE_|CI|CARGO_TERM_)|^(RUST_BACKTRACE|RUST_LOG|RUST_TEST_THREADS|RUST_MIN_STACK|TERM|NO_COLOR|http_proxy|https_proxy|no_proxy|HTTP_PROXY|HTTPS_PROXY|NO_PROXY)$'
while IFS= read -r name; do
  case "$name" in MOTE_CACHE) continue ;; esac
  if [[ $name =~ $pass_re ]] || [[ " ${MOTE_TRIXIE_ENV:-} " == *" $name "* ]]; then
    ENVS+=("$name=${!name}")
  fi
done < <(compgen -e)

# Directories bound at the same path inside (order matters: parents first).
BINDS=(/tmp "$ROOT" "$MOTE_CACHE")
under() { case "$1/" in "$2"/*) return 0 ;; *) return 1 ;; esac; }
visible() { local b; for b in "${BINDS[@]}"; do under "$1" "$b" && return 0; done; return 1; }
# System paths are never bound over the chroot's own (a working directory there means the
# chroot's directory of that name).
system_path() {
  case "$1" in
    / | /root | /var | /usr | /usr/* | /etc | /etc/* | /bin | /bin/* | /sbin | /sbin/* | /lib | /lib/* \
    | /lib32 | /lib32/* | /lib64 | /lib64/* | /libx32 | /libx32/* | /proc | /proc/* | /sys | /sys/* \
    | /dev | /dev/* | /boot | /boot/* | /run | /run/* | /var/lib | /var/lib/* | /var/cache \
    | /var/cache/* | /var/log | /var/log/*) return 0 ;;
  esac
  return 1
}
# Extra directories: MOTE_TRIXIE_BINDS (space-separated), MOTE_ZOO_DIR, the target folder and
# the working directory, unless already visible.
for d in ${MOTE_TRIXIE_BINDS:-} "${MOTE_ZOO_DIR:-}" "$TRIXIE_TARGET" "$CWD"; do
  if [ -z "$d" ] || [ ! -d "$d" ]; then continue; fi
  d=$(cd "$d" && pwd -P)
  if ! system_path "$d" && ! visible "$d"; then
    BINDS+=("$d")
  fi
done

# shellcheck disable=SC2016
exec unshare --mount --propagation private -- /bin/bash -euo pipefail -c '
  C=$1 CWD=$2 NB=$3; shift 3
  binds=("${@:1:$NB}"); shift "$NB"
  mount -t proc proc "$C/proc" 2>/dev/null || mount --rbind /proc "$C/proc"
  mount --rbind /dev "$C/dev"
  mount --rbind /sys "$C/sys" 2>/dev/null || true
  for f in /etc/resolv.conf /etc/hosts; do
    [ -f "$f" ] && [ -f "$C$f" ] && mount --bind "$f" "$C$f" 2>/dev/null || true
  done
  for d in "${binds[@]}"; do
    mkdir -p "$C$d"
    mount --bind "$d" "$C$d"
  done
  exec chroot "$C" /usr/bin/env -i "$@"
' in-trixie "$CHROOT" "$CWD" "${#BINDS[@]}" "${BINDS[@]}" \
  "${ENVS[@]}" /bin/sh -c 'cd "$0" && exec "$@"' "$CWD" "$@"
