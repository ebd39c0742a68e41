#!/usr/bin/env bash
# Makes sure this machine has an OpenCL device for the tests (docs/opencl.md §6): POCL, Debian's
# OpenCL implementation for the CPU, behind the ocl-icd loader. Installs the Debian packages
# when they are missing and the script runs as root; otherwise fails, naming them. Prints the
# platforms and devices found (clinfo -l).
#
#   scripts/opencl.sh
set -euo pipefail
pkgs=(ocl-icd-libopencl1 pocl-opencl-icd clinfo)
missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    [ "$(id -u)" = 0 ] || { echo "opencl.sh: missing Debian packages: ${missing[*]} (run: sudo apt-get install -y ${missing[*]})" >&2; exit 1; }
    echo "opencl.sh: installing ${missing[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y --no-install-recommends "${missing[@]}" >&2 \
        || { apt-get update >&2 && apt-get install -y --no-install-recommends "${missing[@]}" >&2; } \
        || { echo "opencl.sh: apt-get install ${missing[*]} failed" >&2; exit 1; }
fi
devices="$(clinfo -l 2>&1)" || { echo "opencl.sh: clinfo failed: $devices" >&2; exit 1; }
echo "$devices"
grep -q 'Device #' <<<"$devices" || { echo "opencl.sh: OpenCL lists no device" >&2; exit 1; }
