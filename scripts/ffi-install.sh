#!/usr/bin/env bash
# Build Mote's C library and install it for C/C++ embedders:
#
#   scripts/ffi-install.sh PREFIX [--debug]
#
# installs PREFIX/include/mote.h, PREFIX/lib/libmote.so.0 (+ libmote.so), PREFIX/lib/libmote.a,
# PREFIX/lib/pkgconfig/{mote,mote-static}.pc and PREFIX/lib/cmake/mote/moteConfig*.cmake.
# Then: gcc app.c $(PKG_CONFIG_PATH=PREFIX/lib/pkgconfig pkg-config --cflags --libs mote)
# or, in CMake: find_package(mote REQUIRED) with CMAKE_PREFIX_PATH=PREFIX.
set -euo pipefail

die() { echo "ffi-install.sh: error: $*" >&2; exit 1; }
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
[ $# -ge 1 ] || die "usage: scripts/ffi-install.sh PREFIX [--debug]"
prefix="$1"
profile=release
[ "${2:-}" = "--debug" ] && profile=debug

mkdir -p "$prefix"
prefix="$(cd "$prefix" && pwd)"
flags=(); [ "$profile" = release ] && flags=(--release)
(cd "$root" && cargo build -p mote-ffi "${flags[@]}" >&2) || die "cargo build -p mote-ffi failed"
target="${CARGO_TARGET_DIR:-$root/target}/$profile"

version="$(sed -n 's/^version = "\(.*\)"/\1/p' "$root/Cargo.toml" | head -1)"
minor="$(echo "$version" | cut -d. -f2)"
mkdir -p "$prefix/include" "$prefix/lib/pkgconfig" "$prefix/lib/cmake/mote"
install -m 644 "$root/ffi/include/mote.h" "$prefix/include/mote.h"
install -m 755 "$target/libmote_ffi.so" "$prefix/lib/libmote.so.$version"
ln -sf "libmote.so.$version" "$prefix/lib/libmote.so.0"
ln -sf "libmote.so.0" "$prefix/lib/libmote.so"
install -m 644 "$target/libmote_ffi.a" "$prefix/lib/libmote.a"
for pc in mote mote-static; do
    sed -e "s|@PREFIX@|$prefix|" -e "s|@VERSION@|$version|" "$root/ffi/pkg/$pc.pc.in" > "$prefix/lib/pkgconfig/$pc.pc"
done
install -m 644 "$root/ffi/pkg/moteConfig.cmake" "$prefix/lib/cmake/mote/moteConfig.cmake"
sed -e "s|@VERSION@|$version|" -e "s|@MINOR@|$minor|" "$root/ffi/pkg/moteConfigVersion.cmake.in" \
    > "$prefix/lib/cmake/mote/moteConfigVersion.cmake"
echo "ffi-install.sh: installed Mote $version ($profile) into $prefix" >&2
echo "$prefix"
