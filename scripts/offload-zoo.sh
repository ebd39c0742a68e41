#!/usr/bin/env bash
# Build (or reuse) the offload test zoo: small models partitioned by python/mote_tvm into
# `mote.subgraph` calls (docs/subgraph-format.md), in ACL and BNNS flavours, with TVM 0.27.
#
#   scripts/offload-zoo.sh [--target x86_64|aarch64]      (default x86_64)
#
# The zoo goes to ${MOTE_CACHE:-$HOME/.cache/mote}/offload-zoo-<target>-<hash>, where <hash>
# covers python/offload_zoo.py, python/zoo_common.py, python/mote_tvm/*.py, python/onnx_models.py,
# python/requirements.txt, this script, scripts/lib/zoo-common.sh and the target; an existing zoo
# with a `.ok` marker is reused.  A build happens in a temporary folder that is renamed into
# place only when complete.  The builder fails (and nothing is cached) if TVM running a
# partitioned model with the numpy reference registered disagrees with the unpartitioned oracle.
#
# aarch64: offload_zoo.py writes NAME.tar (lib0.o + devc.o); this script links each into
# NAME.so with $MOTE_AARCH64_LINK, e.g. MOTE_AARCH64_LINK="scripts/in-trixie.sh aarch64-linux-gnu-gcc"
# (run from the repository root; the cache folder must be visible at the same path).
#
# Prints the zoo folder as the last stdout line; progress goes to stderr.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
zoo_prog=offload-zoo.sh
zoo_kind=offload-zoo
zoo_label="offload zoo"
zoo_builder=python/offload_zoo.py
zoo_hash_files=("$root/python/offload_zoo.py" "$root"/python/mote_tvm/*.py "$root/python/onnx_models.py"
                "$root/python/onnx_archs.py"
                "$root/python/requirements.txt" "$root/scripts/offload-zoo.sh")
zoo_format_doc=3
# shellcheck source=scripts/lib/zoo-common.sh
. "$root/scripts/lib/zoo-common.sh"
zoo_main "$@"
