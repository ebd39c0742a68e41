#!/usr/bin/env bash
# Build (or reuse) the OpenCL test zoo: kernel-only libraries and Relax models compiled by
# TVM 0.27 for Target("opencl", host=llvm), with reference outputs from the same computation
# compiled for the CPU and run by TVM (the wheel cannot run OpenCL; docs/opencl.md §6).
#
#   scripts/opencl-zoo.sh [--target x86_64|aarch64]      (default x86_64)
#
# The zoo goes to ${MOTE_CACHE:-$HOME/.cache/mote}/opencl-zoo-<target>-<hash>, where <hash>
# covers python/opencl_zoo.py, python/zoo_common.py, python/requirements.txt, this script,
# scripts/lib/zoo-common.sh and the target; an existing zoo with a `.ok` marker is reused.
# A build happens in a temporary folder that is renamed into place only when complete, so an
# interrupted build never leaves a half zoo.
#
# aarch64 (the host code for aarch64, the kernels unchanged): opencl_zoo.py writes NAME.tar
# (lib0.o + devc.o); this script links each into NAME.so with $MOTE_AARCH64_LINK, e.g.
#   MOTE_AARCH64_LINK="scripts/in-trixie.sh aarch64-linux-gnu-gcc"
# (run from the repository root; the cache folder must be visible at the same path).
#
# Prints the zoo folder as the last stdout line; progress goes to stderr.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
zoo_prog=opencl-zoo.sh
zoo_kind=opencl-zoo
zoo_label="OpenCL zoo"
zoo_builder=python/opencl_zoo.py
zoo_hash_files=("$root/python/opencl_zoo.py" "$root/python/requirements.txt" "$root/scripts/opencl-zoo.sh")
zoo_format_doc=
# shellcheck source=scripts/lib/zoo-common.sh
. "$root/scripts/lib/zoo-common.sh"
zoo_main "$@"
