#!/usr/bin/env bash
# Ensure a Debian trixie chroot with the cross/mobile toolchains exists; print its path.
#
#   scripts/trixie.sh            -> last stdout line: the chroot's absolute path
#
# The chroot has trixie's Rust 1.85 (+ aarch64 std, rust-src), the aarch64 cross compiler,
# Arm Compute Library (arm64), qemu-user and Swift. It lives at
#   ${MOTE_CACHE:-$HOME/.cache/mote}/trixie-<12 hex of sha256(package list + script version)>
# and holds a marker file written only after a fully successful install, so re-runs are
# instant. A directory without the marker is a half-built chroot: it is removed and redone.
# Progress goes to stderr. Needs root (debootstrap, chroot, mount).
#
# Environment:
#   MOTE_CACHE            cache root (default $HOME/.cache/mote)
#   MOTE_DEBIAN_MIRROR    Debian mirror to use (default: the host's own, from its apt sources)
set -euo pipefail

# Bump when the way the chroot is built changes (changes the directory name, forcing a rebuild).
SCRIPT_VERSION=1
SUITE=trixie
# Packages installed into the chroot (after `dpkg --add-architecture arm64`).
PACKAGES=(
  rustc cargo rust-src libstd-rust-dev:arm64
  gcc g++ libc6-dev
  gcc-aarch64-linux-gnu g++-aarch64-linux-gnu libc6-dev-arm64-cross
  libarm-compute-dev:arm64
  qemu-user
  swiftlang
  git pkg-config
  lld
  # ThreadSanitizer (scripts/tsan.sh): clang 19 links the test programs and its compiler-rt is
  # the TSan runtime of rustc 1.85's LLVM 19, which Debian's rustc does not ship.
  # llvm-19 brings llvm-symbolizer, which names the functions in its reports.
  clang-19 libclang-rt-19-dev llvm-19
)

log() { printf '[trixie] %s\n' "$*" >&2; }
die() { printf '[trixie] ERROR: %s\n' "$*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "must run as root (debootstrap/chroot/mount)"

CACHE=${MOTE_CACHE:-$HOME/.cache/mote}
mkdir -p "$CACHE"
CACHE=$(cd "$CACHE" && pwd -P)

HASH=$(printf '%s\n' "version=$SCRIPT_VERSION" "suite=$SUITE" "${PACKAGES[@]}" | sha256sum | cut -c1-12)
CHROOT="$CACHE/trixie-$HASH"
MARKER="$CHROOT/.mote-trixie-ready"

# Fast path: already built.
if [ -f "$MARKER" ]; then
  printf '%s\n' "$CHROOT"
  exit 0
fi

# Serialize concurrent builders of the same cache.
exec 9>"$CACHE/trixie.lock"
flock 9
if [ -f "$MARKER" ]; then            # someone else finished it while we waited
  printf '%s\n' "$CHROOT"
  exit 0
fi

# Are any mounts below $1 (in this mount namespace)?
mounts_below() {
  awk -v p="$1/" '{ m = $5; gsub(/\\040/, " ", m); if (index(m "/", p) == 1) { print m } }' \
    /proc/self/mountinfo
}

remove_chroot() {
  local dir=$1 m
  # Never rm -rf through a bind mount (it would delete the host's files).
  if [ -n "$(mounts_below "$dir")" ]; then
    log "unmounting leftovers below $dir"
    mounts_below "$dir" | sort -r | while read -r m; do umount -l "$m" || true; done
  fi
  [ -z "$(mounts_below "$dir")" ] || die "still mounted below $dir; refusing to delete it"
  rm -rf --one-file-system "$dir"
}

host_mirror() {
  local m=""
  if [ -n "${MOTE_DEBIAN_MIRROR:-}" ]; then
    printf '%s\n' "$MOTE_DEBIAN_MIRROR"; return
  fi
  if [ -f /etc/apt/sources.list.d/debian.sources ]; then
    m=$(awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/debian.sources)
  fi
  if [ -z "$m" ] && [ -f /etc/apt/sources.list ]; then
    m=$(awk '$1=="deb" && $0 !~ /security/ { for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) { print $i; exit } }' \
      /etc/apt/sources.list)
  fi
  printf '%s\n' "${m:-http://deb.debian.org/debian}"
}

if [ -e "$CHROOT" ]; then
  log "removing half-built chroot $CHROOT (no marker)"
  remove_chroot "$CHROOT"
fi

if ! command -v debootstrap >/dev/null 2>&1; then
  log "installing debootstrap on the host"
  export DEBIAN_FRONTEND=noninteractive
  if ! apt-get install -y --no-install-recommends debootstrap >&2; then
    apt-get update >&2
    apt-get install -y --no-install-recommends debootstrap >&2
  fi
fi
command -v debootstrap >/dev/null 2>&1 || die "debootstrap not available"
command -v unshare >/dev/null 2>&1 || die "unshare (util-linux) not available"

MIRROR=$(host_mirror)
START=$(date +%s)
log "building $CHROOT from $MIRROR (takes several minutes, ~3 GB)"

debootstrap --variant=minbase --include=ca-certificates "$SUITE" "$CHROOT" "$MIRROR" >&2 \
  || die "debootstrap failed (see $CHROOT/debootstrap/debootstrap.log if present)"
log "debootstrap done after $(( $(date +%s) - START )) s"

# The host's CA bundle (registries may sit behind an interception proxy), resolver, and apt
# settings the host's mirror may need (e.g. a snapshot mirror with an expired Release date).
mkdir -p "$CHROOT/etc/ssl/certs"
if [ -f /etc/ssl/certs/ca-certificates.crt ]; then
  cp /etc/ssl/certs/ca-certificates.crt "$CHROOT/etc/ssl/certs/ca-certificates.crt"
fi
cp /etc/resolv.conf "$CHROOT/etc/resolv.conf" 2>/dev/null || true
cat > "$CHROOT/etc/apt/apt.conf.d/99mote" <<'EOF'
Acquire::Check-Valid-Until "false";
Acquire::Check-Date "false";
Acquire::Retries "5";
APT::Install-Recommends "false";
APT::Install-Suggests "false";
EOF
# Don't start services from package scripts.
printf '#!/bin/sh\nexit 101\n' > "$CHROOT/usr/sbin/policy-rc.d"
chmod +x "$CHROOT/usr/sbin/policy-rc.d"

# Install packages with /proc and /dev mounted, inside a private mount namespace so the
# mounts vanish when done, whatever happens.
log "installing: ${PACKAGES[*]}"
# shellcheck disable=SC2016
unshare --mount --propagation private -- /bin/bash -euo pipefail -c '
  C=$1; shift
  mount -t proc proc "$C/proc" 2>/dev/null || mount --rbind /proc "$C/proc"
  mount --rbind /dev "$C/dev"
  mount --rbind /sys "$C/sys" 2>/dev/null || true
  exec chroot "$C" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
    DEBIAN_FRONTEND=noninteractive /bin/sh -euc "
      dpkg --add-architecture arm64
      apt-get update
      apt-get install -y --no-install-recommends \"\$@\"
      apt-get clean
    " sh "$@"
' bash "$CHROOT" "${PACKAGES[@]}" >&2 || die "package installation failed; re-run to retry"

# Sanity checks before declaring success (inside the chroot: some tools are absolute symlinks).
# shellcheck disable=SC2016
chroot "$CHROOT" /usr/bin/env -i PATH=/usr/bin:/bin /bin/sh -euc '
  for tool in rustc cargo aarch64-linux-gnu-gcc aarch64-linux-gnu-g++ qemu-aarch64 swift clang-19; do
    [ -x "$(command -v "$tool")" ] || { echo "missing $tool in the chroot" >&2; exit 1; }
  done
  [ -d /usr/lib/rustlib/src/rust/library ] || { echo "rust-src missing" >&2; exit 1; }
  [ -e /usr/lib/aarch64-linux-gnu/libarm_compute.so ] || { echo "libarm_compute.so (arm64) missing" >&2; exit 1; }
  [ -d /usr/lib/rustlib/aarch64-unknown-linux-gnu/lib ] || { echo "aarch64 std missing" >&2; exit 1; }
' >&2 || die "sanity check of the chroot failed"

{
  echo "suite=$SUITE"
  echo "version=$SCRIPT_VERSION"
  echo "mirror=$MIRROR"
  echo "built=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "packages=${PACKAGES[*]}"
} > "$MARKER"
log "ready after $(( $(date +%s) - START )) s: $CHROOT"
printf '%s\n' "$CHROOT"
