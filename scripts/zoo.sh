#!/usr/bin/env bash
# Build (or reuse) the test model zoo with TVM 0.27.
#
#   scripts/zoo.sh [--target x86_64|aarch64]      (default x86_64)
#
# The zoo goes to ${MOTE_CACHE:-$HOME/.cache/mote}/zoo-<target>-<hash>, where <hash>
# covers python/zoo.py, python/requirements.txt, this script and the target; an existing zoo with
# a `.ok` marker is reused.  A build happens in a temporary folder that is renamed
# into place only when complete, so an interrupted build never leaves a half zoo.
#
# aarch64: zoo.py writes NAME.tar (lib0.o + devc.o); this script links each into
# NAME.so with $MOTE_AARCH64_LINK, a command such as
#   MOTE_AARCH64_LINK="scripts/in-trixie.sh aarch64-linux-gnu-gcc"
# (run from the repository root; the cache folder must be visible at the same path).
#
# Prints the zoo folder as the last stdout line; progress goes to stderr.
set -euo pipefail

die() { echo "zoo.sh: error: $*" >&2; exit 1; }
log() { echo "zoo.sh: $*" >&2; }

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
target=x86_64
while [ $# -gt 0 ]; do
    case "$1" in
        --target) [ $# -ge 2 ] || die "--target needs a value"; target="$2"; shift 2 ;;
        --target=*) target="${1#--target=}"; shift ;;
        -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 0 ;;
        *) die "unknown argument '$1' (usage: scripts/zoo.sh [--target x86_64|aarch64])" ;;
    esac
done
case "$target" in
    x86_64|aarch64) ;;
    *) die "unsupported target '$target' (x86_64 or aarch64)" ;;
esac

link_cmd=()
if [ "$target" = aarch64 ]; then
    [ -n "${MOTE_AARCH64_LINK:-}" ] || die "MOTE_AARCH64_LINK is not set; for aarch64 it must name a linker command, e.g. MOTE_AARCH64_LINK=\"scripts/in-trixie.sh aarch64-linux-gnu-gcc\""
    read -r -a link_cmd <<<"$MOTE_AARCH64_LINK"
fi

cache="${MOTE_CACHE:-$HOME/.cache/mote}"
hash="$( { cat "$root/python/zoo.py" "$root/python/requirements.txt" "$root/scripts/zoo.sh"; printf 'target=%s\n' "$target"; } \
         | sha256sum | cut -c1-12 )"
zoo="$cache/zoo-$target-$hash"

if [ -f "$zoo/.ok" ]; then
    log "reusing $zoo"
    echo "$zoo"
    exit 0
fi

venv="$("$root/scripts/venv.sh" | tail -n 1)" || die "scripts/venv.sh failed"
[ -x "$venv/bin/python" ] || die "scripts/venv.sh did not give a usable venv ('$venv')"

mkdir -p "$cache"
# One builder at a time per zoo; a second caller waits, then reuses the result.
exec 9>"$zoo.lock"
if command -v flock >/dev/null 2>&1; then
    flock 9 || die "cannot lock $zoo.lock"
fi
if [ -f "$zoo/.ok" ]; then
    log "reusing $zoo (built by another process)"
    echo "$zoo"
    exit 0
fi

tmp="$(mktemp -d "$cache/.zoo-$target-$hash.tmp.XXXXXX")"
cleanup() { rm -rf "$tmp"; }
trap cleanup EXIT

log "building the $target zoo into $zoo"
start=$(date +%s)
"$venv/bin/python" "$root/python/zoo.py" --target "$target" --out "$tmp" >&2 \
    || die "python/zoo.py --target $target failed"

if [ "$target" = aarch64 ]; then
    shopt -s nullglob
    tars=("$tmp"/*.tar)
    shopt -u nullglob
    [ ${#tars[@]} -gt 0 ] || die "python/zoo.py produced no .tar files"
    for tarball in "${tars[@]}"; do
        name="$(basename "$tarball" .tar)"
        objs="$tmp/$name.objs"
        mkdir -p "$objs"
        tar -xf "$tarball" -C "$objs" || die "cannot unpack $tarball"
        [ -f "$objs/lib0.o" ] && [ -f "$objs/devc.o" ] || die "$tarball lacks lib0.o/devc.o"
        log "linking $name.so with: ${link_cmd[*]}"
        (cd "$root" && "${link_cmd[@]}" -shared -fPIC -o "$tmp/$name.so" "$objs/lib0.o" "$objs/devc.o") >&2 \
            || die "linking $name.so failed (MOTE_AARCH64_LINK='$MOTE_AARCH64_LINK')"
        [ -s "$tmp/$name.so" ] || die "the linker did not produce $tmp/$name.so"
        rm -rf "$objs"
    done
fi

# Every model in the manifest must have its library.
"$venv/bin/python" - "$tmp" >&2 <<'EOF' || die "the built zoo is incomplete"
import json, os, sys
d = sys.argv[1]
m = json.load(open(os.path.join(d, "manifest.json")))
missing = [x["file"] for x in m["models"] if not os.path.isfile(os.path.join(d, x["file"]))]
for x in m["models"]:
    for c in x["cases"]:
        for k in ("inputs", "expected"):
            if c[k] and not os.path.isfile(os.path.join(d, c[k])):
                missing.append(c[k])
if missing or not m["models"]:
    sys.exit("missing: %s" % (", ".join(missing) or "all models"))
EOF

touch "$tmp/.ok"
rm -rf "$zoo"            # a stale, unmarked leftover (we hold the lock)
mv -T "$tmp" "$zoo" || die "cannot move $tmp to $zoo"
trap - EXIT
log "zoo ready in $(( $(date +%s) - start ))s: $zoo"
echo "$zoo"
