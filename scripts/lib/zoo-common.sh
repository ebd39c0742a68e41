# shellcheck shell=bash disable=SC2154  # the zoo_* settings and root come from the caller
# Shared body of scripts/zoo.sh and scripts/offload-zoo.sh (sourced, not run).
#
# The caller sets, then runs `zoo_main "$@"`:
#   root             the repository root
#   zoo_prog         its name for messages and usage (zoo.sh, offload-zoo.sh)
#   zoo_kind         the cache folder prefix (zoo, offload-zoo)
#   zoo_label        what it builds, for messages (zoo, offload zoo)
#   zoo_builder      the Python builder, relative to the repository root
#   zoo_hash_files   the files whose content, with the target, names the cache folder (both
#                    zoos add python/zoo_common.py and this file here)
#   zoo_format_doc   the manifest's required format_doc_version, or empty for none
#
# Cache folder: ${MOTE_CACHE:-$HOME/.cache/mote}/<zoo_kind>-<target>-<hash>; an existing one with
# a `.ok` marker is reused.  A build happens in a temporary folder renamed into place only when
# complete; one builder at a time per folder (flock).  aarch64: the builder writes NAME.tar
# (lib0.o + devc.o; lib0.o alone for a kernel-only library; lib0.c + devc.c when TVM left no
# kernel) and each is linked into NAME.so with $MOTE_AARCH64_LINK.  Prints the folder as the last stdout line; progress goes to stderr.

die() { echo "$zoo_prog: error: $*" >&2; exit 1; }
log() { echo "$zoo_prog: $*" >&2; }

zoo_main() {
    local target cache hash zoo venv start
    local -a link_cmd=()
    target=x86_64
    while [ $# -gt 0 ]; do
        case "$1" in
            --target) [ $# -ge 2 ] || die "--target needs a value"; target="$2"; shift 2 ;;
            --target=*) target="${1#--target=}"; shift ;;
            -h|--help) zoo_help; exit 0 ;;
            *) die "unknown argument '$1' (usage: scripts/$zoo_prog [--target x86_64|aarch64])" ;;
        esac
    done
    case "$target" in
        x86_64|aarch64) ;;
        *) die "unsupported target '$target' (x86_64 or aarch64)" ;;
    esac

    if [ "$target" = aarch64 ]; then
        [ -n "${MOTE_AARCH64_LINK:-}" ] || die "MOTE_AARCH64_LINK is not set; for aarch64 it must name a linker command, e.g. MOTE_AARCH64_LINK=\"scripts/in-trixie.sh aarch64-linux-gnu-gcc\""
        read -r -a link_cmd <<<"$MOTE_AARCH64_LINK"
    fi

    cache="${MOTE_CACHE:-$HOME/.cache/mote}"
    hash="$( { cat "${zoo_hash_files[@]}" "$root/python/zoo_common.py" "$root/scripts/lib/zoo-common.sh"
               printf 'target=%s\n' "$target"; } | sha256sum | cut -c1-12 )"
    zoo="$cache/$zoo_kind-$target-$hash"

    if [ -f "$zoo/.ok" ]; then
        log "reusing $zoo"
        echo "$zoo"
        return 0
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
        return 0
    fi

    tmp="$(mktemp -d "$cache/.$zoo_kind-$target-$hash.tmp.XXXXXX")"
    trap zoo_cleanup EXIT

    log "building the $target $zoo_label into $zoo"
    start=$(date +%s)
    "$venv/bin/python" "$root/$zoo_builder" --target "$target" --out "$tmp" >&2 \
        || die "$zoo_builder --target $target failed"

    if [ "$target" = aarch64 ]; then
        zoo_link "$tmp" "${link_cmd[@]}"
    fi

    # Every model in the manifest must have its library and files.
    "$venv/bin/python" - "$tmp" "$zoo_format_doc" >&2 <<'PY' || die "the built $zoo_label is incomplete"
import json, os, sys
d, fmt = sys.argv[1], sys.argv[2]
m = json.load(open(os.path.join(d, "manifest.json")))
missing = [x["file"] for x in m["models"] if not os.path.isfile(os.path.join(d, x["file"]))]
missing += [x["compiled"]["file"] for x in m["models"]
            if "compiled" in x and not os.path.isfile(os.path.join(d, x["compiled"]["file"]))]
for x in m["models"]:
    for c in x["cases"]:
        for k in ("inputs", "expected"):
            if c[k] and not os.path.isfile(os.path.join(d, c[k])):
                missing.append(c[k])
if fmt and m.get("format_doc_version") != int(fmt):
    sys.exit("manifest.json lacks format_doc_version %s" % fmt)
if missing or not m["models"]:
    sys.exit("missing: %s" % (", ".join(missing) or "all models"))
PY

    touch "$tmp/.ok"
    rm -rf "$zoo"            # a stale, unmarked leftover (we hold the lock)
    mv -T "$tmp" "$zoo" || die "cannot move $tmp to $zoo"
    trap - EXIT
    log "$zoo_label ready in $(( $(date +%s) - start ))s: $zoo"
    echo "$zoo"
}

zoo_cleanup() { rm -rf "$tmp"; }

# The calling script's header comment (from its second line to the first non-comment line).
zoo_help() {
    awk 'NR == 1 { next } !/^#/ { exit } { sub(/^# ?/, ""); print }' "$0" >&2
}

# zoo_link DIR LINKER...: link every DIR/NAME.tar and DIR/compiled/NAME.tar into NAME.so beside it
# (from the repository root).
zoo_link() {
    local dir="$1" tarball name objs out
    local -a tars parts
    shift
    shopt -s nullglob
    tars=("$dir"/*.tar "$dir"/compiled/*.tar)
    shopt -u nullglob
    [ ${#tars[@]} -gt 0 ] || die "$zoo_builder produced no .tar files"
    for tarball in "${tars[@]}"; do
        name="$(basename "$tarball" .tar)"
        out="$(dirname "$tarball")"
        objs="$out/$name.objs"
        mkdir -p "$objs"
        tar -xf "$tarball" -C "$objs" || die "cannot unpack $tarball"
        # A model whose every op is offloaded has no TVM kernel: TVM then ships lib0.c + devc.c
        # (plain C: an empty unit and the module blob) instead of objects; gcc takes both.
        if [ -f "$objs/lib0.o" ] && [ -f "$objs/devc.o" ]; then
            parts=("$objs/lib0.o" "$objs/devc.o")
        # A kernel-only export (a TIR module, no Relax) has no module blob, so no devc.o.
        elif [ -f "$objs/lib0.o" ] && [ "$(ls "$objs")" = lib0.o ]; then
            parts=("$objs/lib0.o")
        elif [ -f "$objs/lib0.c" ] && [ -f "$objs/devc.c" ]; then
            parts=("$objs/lib0.c" "$objs/devc.c")
        else
            die "$tarball lacks lib0.o/devc.o (or lib0.o alone, or lib0.c/devc.c)"
        fi
        log "linking $name.so with: $*"
        (cd "$root" && "$@" -shared -fPIC -o "$out/$name.so" "${parts[@]}") >&2 \
            || die "linking $name.so failed (MOTE_AARCH64_LINK='$MOTE_AARCH64_LINK')"
        [ -s "$out/$name.so" ] || die "the linker did not produce $out/$name.so"
        rm -rf "$objs"
    done
}
