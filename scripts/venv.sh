#!/usr/bin/env bash
# Create (if missing) the Python venv with TVM used to build the model zoo and
# to produce reference outputs.
#
#   scripts/venv.sh            -> prints the venv path as the last stdout line
#
# The venv lives at ${MOTE_CACHE:-$HOME/.cache/mote}/venv-<12 hex of sha256(python/requirements.txt
# followed by the tool pins below)> so that changing either gives a fresh venv.  A `.ok` marker is
# written only after `pip install` succeeded; a venv without it is (re)completed.
# All progress goes to stderr.
set -euo pipefail

die() { echo "venv.sh: error: $*" >&2; exit 1; }
log() { echo "venv.sh: $*" >&2; }

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
req="$root/python/requirements.txt"
[ -f "$req" ] || die "missing $req"

# Tools the scripts run from the venv that TVM itself does not need, pinned: pytest runs
# apache/tvm's own tests (scripts/peer/rpc.sh), psutil is what TVM's RPC extra adds for its
# Python server (it stops its worker processes with it), and PyYAML reads the iOS app's
# XcodeGen spec (scripts/test-ios-app.sh). Part of the venv's hash.
tools=("pytest==9.0.2" "psutil==7.2.2" "pyyaml==6.0.3")

cache="${MOTE_CACHE:-$HOME/.cache/mote}"
hash="$({ cat "$req"; printf '%s\n' "${tools[@]}"; } | sha256sum | cut -c1-12)"
venv="$cache/venv-$hash"

if [ -f "$venv/.ok" ] && [ -x "$venv/bin/python" ]; then
    echo "$venv"
    exit 0
fi

python="${MOTE_PYTHON:-python3}"
command -v "$python" >/dev/null 2>&1 || die "'$python' not found (set MOTE_PYTHON to a Python 3.11 interpreter)"
mkdir -p "$cache" || die "cannot create $cache"

# One installer at a time; a second caller waits, then reuses the result.
exec 9>"$venv.lock"
if command -v flock >/dev/null 2>&1; then
    flock 9 || die "cannot lock $venv.lock"
fi
if [ -f "$venv/.ok" ] && [ -x "$venv/bin/python" ]; then
    echo "$venv"
    exit 0
fi

if [ ! -x "$venv/bin/python" ]; then
    log "creating venv $venv"
    rm -rf "$venv"
    "$python" -m venv "$venv" >&2 || die "'$python -m venv $venv' failed (is python3-venv installed?)"
fi

log "installing $req and ${tools[*]} into $venv (this may take a few minutes the first time)"
"$venv/bin/python" -m pip install --disable-pip-version-check -q -r "$req" "${tools[@]}" >&2 \
    || die "pip install -r $req failed (PyPI reachable? Python 3.11 needed for apache-tvm 0.27 wheels)"

"$venv/bin/python" -c 'import tvm, numpy, pytest, yaml' >&2 \
    || die "the venv at $venv cannot import tvm/numpy/pytest/yaml after installation"

touch "$venv/.ok"
log "venv ready"
echo "$venv"
