# shellcheck shell=bash disable=SC2154  # root comes from the caller
# The zoos the host's test suites read (sourced, not run): `host_zoos` builds or reuses the
# x86_64 zoo and offload zoo and the aarch64 offload zoo (whose code-free files the host also
# runs; the trixie chroot links it), and exports MOTE_ZOO_DIR, MOTE_OFFLOAD_ZOO_DIR and
# MOTE_CODE_FREE_FOREIGN_ZOO_DIR. Needs `root`, the repository root.
host_zoos() {
    MOTE_ZOO_DIR="$("$root/scripts/zoo.sh" --target x86_64 | tail -n 1)"
    MOTE_OFFLOAD_ZOO_DIR="$("$root/scripts/offload-zoo.sh" --target x86_64 | tail -n 1)"
    "$root/scripts/trixie.sh" >/dev/null
    MOTE_CODE_FREE_FOREIGN_ZOO_DIR="$(MOTE_AARCH64_LINK="$root/scripts/in-trixie.sh aarch64-linux-gnu-gcc" \
        "$root/scripts/offload-zoo.sh" --target aarch64 | tail -n 1)"
    export MOTE_ZOO_DIR MOTE_OFFLOAD_ZOO_DIR MOTE_CODE_FREE_FOREIGN_ZOO_DIR
}
