#!/usr/bin/env bash
# Build (or reuse) the test model zoo with TVM 0.27.
#
#   scripts/zoo.sh [--target x86_64|aarch64]      (default x86_64)
#
# The zoo goes to ${MOTE_CACHE:-$HOME/.cache/mote}/zoo-<target>-<hash>, where <hash>
# covers python/zoo.py, python/zoo_common.py, python/requirements.txt, this script,
# scripts/lib/zoo-common.sh and the target; an existing zoo with a `.ok` marker is reused.
# A build happens in a temporary folder that is renamed into place only when complete, so an
# interrupted build never leaves a half zoo.
#
# aarch64: zoo.py writes NAME.tar (lib0.o + devc.o); this script links each into
# NAME.so with $MOTE_AARCH64_LINK, a command such as
#   MOTE_AARCH64_LINK="scripts/in-trixie.sh aarch64-linux-gnu-gcc"
# (run from the repository root; the cache folder must be visible at the same path).
#
# Prints the zoo folder as the last stdout line; progress goes to stderr.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
zoo_prog=zoo.sh
zoo_kind=zoo
zoo_label=zoo
zoo_builder=python/zoo.py
zoo_hash_files=("$root/python/zoo.py" "$root/python/requirements.txt" "$root/scripts/zoo.sh")
zoo_format_doc=
# shellcheck source=scripts/lib/zoo-common.sh
. "$root/scripts/lib/zoo-common.sh"
zoo_main "$@"
