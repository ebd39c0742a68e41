# shellcheck shell=bash
# Helpers shared by the scripts that run `swift test` in the trixie chroot against the host build
# (scripts/test-swift.sh, scripts/test-ios-app.sh).

# python_binds PYTHON: the directory to bind into the chroot so that PYTHON (a venv's python)
# runs there at the same path: the prefix of the interpreter behind it, or nothing for a system
# python (the chroot has its own /usr).
python_binds() {
    local real prefix
    real=$(readlink -f "$1")
    prefix=$(dirname "$(dirname "$real")")
    case "$prefix" in
        /usr | /usr/local) echo "" ;;
        *) echo "$prefix" ;;
    esac
}

# zoo_syslib_archive DIR ZOO PYTHON: unpack the zoo's system-library builds (syslib/NAME.tar in
# ZOO's manifest) into DIR and put every object into DIR/libzoo_syslib.a, each renamed
# NAME_OBJ.o so that the models' lib0.o files do not collide. The archive is meant to be linked
# whole (--whole-archive, docs/system-lib.md). Sets MOTE_SYSLIB_MODELS to the models' names,
# comma-separated, for the tests. Returns non-zero, with a message, when the zoo has none.
zoo_syslib_archive() {
    local dir=$1 zoo=$2 python=$3 name archive o models=()
    rm -rf "$dir" && mkdir -p "$dir" || return 1
    while read -r name archive; do
        mkdir -p "$dir/$name"
        tar -xf "$zoo/$archive" -C "$dir/$name" || { echo "cannot unpack $zoo/$archive" >&2; return 1; }
        for o in "$dir/$name"/*.o; do mv "$o" "$dir/${name}_$(basename "$o")"; done
        models+=("$name")
    done < <("$python" -c 'import json, sys
for m in json.load(open(sys.argv[1]))["models"]:
    if "system_lib" in m: print(m["name"], m["system_lib"]["archive"])' "$zoo/manifest.json")
    if [ ${#models[@]} -eq 0 ]; then
        echo "the zoo at $zoo has no system-library builds (scripts/zoo.sh | tail -1 gives the current zoo)" >&2
        return 1
    fi
    ar rcs "$dir/libzoo_syslib.a" "$dir"/*.o || { echo "ar failed" >&2; return 1; }
    MOTE_SYSLIB_MODELS=$(IFS=,; echo "${models[*]}")
    export MOTE_SYSLIB_MODELS
}
