#!/usr/bin/env bash
# Build models as TVM system libraries for iOS into ios-app/Models/libmodels.a (make_models.py
# says how), with the TVM 0.27 venv's python:
#
#   MOTE_PYTHON=.../bin/python ios-app/scripts/make-models.sh zoo:mlp zoo:cnn
#   MOTE_PYTHON=... ios-app/scripts/make-models.sh --triple arm64-apple-ios14.0-simulator my_model.json=net_
#
# Runs on Linux or macOS: TVM cross-compiles to Mach-O objects itself and llvm-ar archives them;
# no Apple SDK is needed. The archive is not committed (ios-app/.gitignore).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
PY=${MOTE_PYTHON:-}
if [ -z "$PY" ] || [ ! -x "$PY" ]; then
  echo "make-models: set MOTE_PYTHON to a python with TVM 0.27 (scripts/venv.sh makes one)" >&2
  exit 1
fi
exec "$PY" "$HERE/make_models.py" "$@"
