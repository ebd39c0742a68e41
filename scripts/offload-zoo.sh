#!/usr/bin/env bash
# Build (or reuse) the offload test zoo: small models partitioned by python/mote_tvm into
# `mote.subgraph` calls (docs/subgraph-format.md), in ACL and BNNS flavours, with TVM 0.27.
#
#   scripts/offload-zoo.sh [--target x86_64|aarch64]      (default x86_64)
#
# The zoo goes to ${MOTE_CACHE:-$HOME/.cache/mote}/offload-zoo-<target>-<hash>, where <hash>
# covers python/offload_zoo.py, python/mote_tvm/*.py, python/requirements.txt, this script and
# the target; an existing zoo with a `.ok` marker is reused.  A build happens in a temporary
# folder that is renamed into place only when complete.  The builder fails (and nothing is
# cached) if TVM running a partitioned model with the numpy reference registered disagrees with
# the unpartitioned oracle.
#
# aarch64: offload_zoo.py writes NAME.tar (lib0.o + devc.o); this script links each into
# NAME.so with $MOTE_AARCH64_LINK, e.g. MOTE_AARCH64_LINK="scripts/in-trixie.sh aarch64-linux-gnu-gcc"
# (run from the repository root; the cache folder must be visible at the same path).
#
# Prints the zoo folder as the last stdout line; progress goes to stderr.
set -euo pipefail

die() { echo "offload-zoo.sh: error: $*" >&2; exit 1; }
log() { echo "offload-zoo.sh: $*" >&2; }

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
target=x86_64
while [ $# -gt 0 ]; do
    case "$1" in
        --target) [ $# -ge 2 ] || die "--target needs a value"; target="$2"; shift 2 ;;
        --target=*) target="${1#--target=}"; shift ;;
        -h|--help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 0 ;;
        *) die "unknown argument '$1' (usage: scripts/offload-zoo.sh [--target x86_64|aarch64])" ;;
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
hash="$( { cat "$root/python/offload_zoo.py" "$root"/python/mote_tvm/*.py "$root/python/requirements.txt" \
               "$root/scripts/offload-zoo.sh"; printf 'target=%s\n' "$target"; } \
         | sha256sum | cut -c1-12 )"
zoo="$cache/offload-zoo-$target-$hash"

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

tmp="$(mktemp -d "$cache/.offload-zoo-$target-$hash.tmp.XXXXXX")"
cleanup() { rm -rf "$tmp"; }
trap cleanup EXIT

log "building the $target offload zoo into $zoo"
start=$(date +%s)
"$venv/bin/python" "$root/python/offload_zoo.py" --target "$target" --out "$tmp" >&2 \
    || die "python/offload_zoo.py --target $target failed"

if [ "$target" = aarch64 ]; then
    shopt -s nullglob
    tars=("$tmp"/*.tar)
    shopt -u nullglob
    [ ${#tars[@]} -gt 0 ] || die "python/offload_zoo.py produced no .tar files"
    for tarball in "${tars[@]}"; do
        name="$(basename "$tarball" .tar)"
        objs="$tmp/$name.objs"
        mkdir -p "$objs"
        tar -xf "$tarball" -C "$objs" || die "cannot unpack $tarball"
        # A model whose every op is offloaded has no TVM kernel: TVM then ships lib0.c + devc.c
        # (plain C: an empty unit and the module blob) instead of objects; gcc takes both.
        if [ -f "$objs/lib0.o" ] && [ -f "$objs/devc.o" ]; then
            parts=("$objs/lib0.o" "$objs/devc.o")
        elif [ -f "$objs/lib0.c" ] && [ -f "$objs/devc.c" ]; then
            parts=("$objs/lib0.c" "$objs/devc.c")
        else
            die "$tarball lacks lib0.o/devc.o (or lib0.c/devc.c)"
        fi
        log "linking $name.so with: ${link_cmd[*]}"
        (cd "$root" && "${link_cmd[@]}" -shared -fPIC -o "$tmp/$name.so" "${parts[@]}") >&2 \
            || die "linking $name.so failed (MOTE_AARCH64_LINK='$MOTE_AARCH64_LINK')"
        [ -s "$tmp/$name.so" ] || die "the linker did not produce $tmp/$name.so"
        rm -rf "$objs"
    done
fi

# Every model in the manifest must have its library and files.
"$venv/bin/python" - "$tmp" >&2 <<'EOF' || die "the built offload zoo is incomplete"
import json, os, sys
d = sys.argv[1]
m = json.load(open(os.path.join(d, "manifest.json")))
missing = [x["file"] for x in m["models"] if not os.path.isfile(os.path.join(d, x["file"]))]
for x in m["models"]:
    for c in x["cases"]:
        for k in ("inputs", "expected"):
            if c[k] and not os.path.isfile(os.path.join(d, c[k])):
                missing.append(c[k])
if m.get("format_doc_version") != 1:
    sys.exit("manifest.json lacks format_doc_version 1")
if missing or not m["models"]:
    sys.exit("missing: %s" % (", ".join(missing) or "all models"))
EOF

touch "$tmp/.ok"
rm -rf "$zoo"            # a stale, unmarked leftover (we hold the lock)
mv -T "$tmp" "$zoo" || die "cannot move $tmp to $zoo"
trap - EXIT
log "offload zoo ready in $(( $(date +%s) - start ))s: $zoo"
echo "$zoo"
