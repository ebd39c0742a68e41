#!/usr/bin/env bash
# The C ABI suite: header drift, header hygiene, ABI baseline, C tests under valgrind, and the
# CMake example. Needs MOTE_ZOO_DIR (the x86_64 zoo from scripts/zoo.sh), MOTE_OPENCL_ZOO_DIR
# (scripts/opencl-zoo.sh) and an OpenCL device (POCL: scripts/opencl.sh).
#
#   scripts/test-ffi.sh                 run everything
#   scripts/test-ffi.sh --update-abi    rewrite ffi/abi/{symbols,layout}.txt from this build
#                                       (only for a deliberate, reviewed ABI change)
#
# Prints one line per check and, last, "ffi checks: N passed, M failed".
set -uo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
die() { echo "test-ffi.sh: error: $*" >&2; exit 1; }
[ -n "${MOTE_ZOO_DIR:-}" ] || die "MOTE_ZOO_DIR is not set (run scripts/zoo.sh)"
[ -n "${MOTE_OPENCL_ZOO_DIR:-}" ] || die "MOTE_OPENCL_ZOO_DIR is not set (scripts/opencl-zoo.sh | tail -n 1)"
[ -f "$MOTE_OPENCL_ZOO_DIR/mlp_cl.so" ] || die "MOTE_OPENCL_ZOO_DIR=$MOTE_OPENCL_ZOO_DIR has no mlp_cl.so"
for tool in gcc g++ cmake valgrind pkg-config nm; do
    command -v "$tool" >/dev/null || die "$tool is required and missing"
done
venv="$(scripts/venv.sh | tail -n 1)" || die "no Python venv"
# Every session the C tests make fills fresh and recycled storage with NaN / 0xA5, so a kernel
# task that never ran shows up as a wrong output instead of last run's bytes.
export MOTE_POISON_MEMORY=1

out="${CARGO_TARGET_DIR:-$root/target}/ffi-tests"
rm -rf "$out"; mkdir -p "$out/scratch"
passed=0; failed=0
check() { # check NAME COMMAND...: run, log to $out/NAME.log, count
    local name="$1"; shift
    if "$@" >"$out/$name.log" 2>&1; then
        passed=$((passed + 1)); echo "ffi check: $name ok"
    else
        failed=$((failed + 1)); echo "ffi check: $name FAILED"; tail -n 40 "$out/$name.log" | sed 's/^/    /'
    fi
}

scripts/cbindgen.sh --check >"$out/header-drift.log" 2>&1 \
    && { passed=$((passed + 1)); echo "ffi check: header-drift ok"; } \
    || { failed=$((failed + 1)); echo "ffi check: header-drift FAILED"; cat "$out/header-drift.log"; }

prefix="$(scripts/ffi-install.sh "$out/prefix" --debug | tail -n 1)" || die "ffi-install.sh failed"
inc="$prefix/include"
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"

# The header is self-contained, idempotent, and valid C and C++.
warn=(-Wall -Wextra -Werror -pedantic)
check header-alone-c99 gcc -std=c99 "${warn[@]}" -fsyntax-only -x c "$inc/mote.h"
check header-alone-cxx11 g++ -std=c++11 "${warn[@]}" -fsyntax-only -x c++ "$inc/mote.h"
check header-twice-c11 gcc -std=c11 "${warn[@]}" -I"$inc" -c ffi/tests/c/header_twice.c -o "$out/h.o"
check header-twice-cxx17 g++ -std=c++17 "${warn[@]}" -I"$inc" -x c++ -c ffi/tests/c/header_twice.c -o "$out/hpp.o"

# ABI baseline: exported symbols, struct layouts and enum values.
abi_now="$out/abi"; mkdir -p "$abi_now"
nm -D --defined-only "$prefix/lib/libmote.so" | awk '$2 == "T" {print $3}' | grep -E '^(mote_|TVMFFI|TVMBackend)' | sort \
    > "$abi_now/symbols.txt"
grep -oE '^  MOTE_[A-Z0-9_]+ = ' "$inc/mote.h" | awk '{print "E(" $1 ");"}' > "$out/abi_enums.inc"
gcc -std=c11 -I"$inc" -I"$out" ffi/tests/c/abi_layout.c -o "$out/abi_layout" && "$out/abi_layout" > "$abi_now/layout.txt" \
    || die "abi_layout did not build"
# Every struct with a body in the header must be in abi_layout.c.
missing_structs=""
for s in $(awk '/^typedef struct \{/ {inbody=1; next} inbody && /^\} [A-Za-z]+;/ {gsub(/[};]/,""); print $1; inbody=0}' "$inc/mote.h"); do
    grep -q "S($s)" ffi/tests/c/abi_layout.c || missing_structs="$missing_structs $s"
done
if [ "${1:-}" = "--update-abi" ]; then
    cp "$abi_now/symbols.txt" "$abi_now/layout.txt" ffi/abi/
    echo "test-ffi.sh: rewrote ffi/abi/symbols.txt and ffi/abi/layout.txt" >&2
fi
check abi-symbols diff -u ffi/abi/symbols.txt "$abi_now/symbols.txt"
check abi-layout diff -u ffi/abi/layout.txt "$abi_now/layout.txt"
check abi-structs-covered test -z "$missing_structs"

# C tests, built against the installed header and library, run under valgrind memcheck.
cflags=(-std=c11 -D_GNU_SOURCE "${warn[@]}" -Wno-pedantic -g -O1)
for t in test_api test_zoo test_callbacks test_budgets test_opencl; do
    gcc "${cflags[@]}" "ffi/tests/c/$t.c" -o "$out/$t" $(pkg-config --cflags --libs mote) -lpthread -lm \
        || die "$t did not build"
done
gcc -std=gnu11 -Wall -Wextra -Werror -g ffi/tests/c/test_dlopen.c -I"$inc" -o "$out/test_dlopen" -ldl \
    || die "test_dlopen did not build"
"$venv/bin/python" ffi/tests/zoo_cases.py "$MOTE_ZOO_DIR" "$out/cases" 2>"$out/zoo-cases.log" \
    || { cat "$out/zoo-cases.log" >&2; die "zoo_cases.py failed"; }
# Every zoo case runs through the C ABI except these, excluded by name: a kernel with a scalar
# parameter cannot be called from C, since mote_session_run passes tensors only (ffi/README.md;
# the Rust, Java and Swift zoo suites run them). c-zoo-cases fails if any other case is left
# out, if one of these is no longer left out, or if the counts do not add up to the manifest's.
zoo_excluded=(kernels.scaled_gemm kernels.shift)
zoo_total=$("$venv/bin/python" -c 'import json, sys
print(sum(len(m["cases"]) for m in json.load(open(sys.argv[1] + "/manifest.json"))["models"]))' "$MOTE_ZOO_DIR")
zoo_run=$(grep -c '^case ' "$out/cases/cases.txt")
echo "ffi zoo: $zoo_run of $zoo_total zoo cases through the C ABI; excluded by name:"
sed 's/^/    /' "$out/cases/excluded.txt"
zoo_cases_ok() {
    diff -u <(printf '%s\n' "${zoo_excluded[@]}" | sort) <(cut -d' ' -f1 "$out/cases/excluded.txt" | sort) \
        && [ "$((zoo_run + ${#zoo_excluded[@]}))" = "$zoo_total" ] && [ "$zoo_run" -gt 0 ]
}
check c-zoo-cases zoo_cases_ok
# Hand-made models for test_budgets.c (mote::fuzzing::craft: an endless loop, endless
# recursion, a gzip tar that inflates past a small load budget), written by Rust code in the
# repository instead of checked in as bytes.
cargo run -q -p mote-ffi --example craft_models -- "$out/crafted" >"$out/craft-models.log" 2>&1 \
    || { cat "$out/craft-models.log" >&2; die "craft_models failed"; }
"$venv/bin/python" ffi/tests/callback_models.py "$out/models" >"$out/callback-models.log" 2>&1 \
    || { cat "$out/callback-models.log" >&2; die "callback_models.py failed"; }
vg=(valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite,indirect
    --show-leak-kinds=definite,indirect)
check c-api-valgrind "${vg[@]}" "$out/test_api" "$MOTE_ZOO_DIR" "$out/scratch"
check c-zoo-valgrind "${vg[@]}" "$out/test_zoo" "$out/cases" "$zoo_run"
check c-callbacks-valgrind "${vg[@]}" "$out/test_callbacks" "$MOTE_ZOO_DIR" "$out/models"
check c-budgets-valgrind "${vg[@]}" "$out/test_budgets" "$out/crafted" "$MOTE_ZOO_DIR"
check c-dlopen-local-valgrind "${vg[@]}" "$out/test_dlopen" "$prefix/lib/libmote.so" "$MOTE_ZOO_DIR"

# OpenCL (docs/opencl.md): mlp_cl.so on device 0 of this host (POCL) with the C options, its
# output against TVM's (the zoo's .npz files as raw floats), device 99 refused. Not under
# valgrind: POCL compiles the kernels with LLVM in-process (minutes under memcheck, and its
# own allocations are not Mote's to answer for).
"$venv/bin/python" -c 'import sys, numpy as np
d = sys.argv[1]
np.load(d + "/mlp_cl.main.inputs.npz")["arg0"].astype("<f4").tofile(sys.argv[2])
np.load(d + "/mlp_cl.main.expected.npz")["out0"].astype("<f4").tofile(sys.argv[3])' \
    "$MOTE_OPENCL_ZOO_DIR" "$out/mlp_cl.in.f32" "$out/mlp_cl.expected.f32" || die "cannot read mlp_cl's .npz files"
mkdir -p "$out/cl-cache"
check c-opencl "$out/test_opencl" "$MOTE_OPENCL_ZOO_DIR" "$MOTE_ZOO_DIR" "$out/cl-cache" \
    "$out/mlp_cl.in.f32" "$out/mlp_cl.expected.f32"

# Statically linked models (docs/system-lib.md): the zoo's system-library objects in one static
# archive, linked whole into C programs against libmote.a: they load by prefix and match TVM
# (test_zoo.c on zoo_cases.py --system-lib). Linked from the archive without --whole-archive,
# the objects are left out and every prefix is unknown: the documented rule, as a test.
syslib="$out/syslib"; mkdir -p "$syslib"
syslib_prefixes=()
while read -r name pfx tarball; do
    mkdir -p "$syslib/$name"
    tar -xf "$MOTE_ZOO_DIR/$tarball" -C "$syslib/$name" || die "cannot unpack $tarball"
    for o in "$syslib/$name"/*.o; do mv "$o" "$syslib/$name.$(basename "$o")"; done
    syslib_prefixes+=("$pfx")
done < <("$venv/bin/python" -c 'import json, sys
for m in json.load(open(sys.argv[1] + "/manifest.json"))["models"]:
    if "system_lib" in m: print(m["name"], m["system_lib"]["prefix"], m["system_lib"]["archive"])' "$MOTE_ZOO_DIR")
[ ${#syslib_prefixes[@]} -ge 4 ] || die "the zoo in MOTE_ZOO_DIR has no system-library builds (rebuild it with scripts/zoo.sh)"
ar crs "$out/libzoo_syslib.a" "$syslib"/*.o || die "ar failed"
"$venv/bin/python" ffi/tests/zoo_cases.py "$MOTE_ZOO_DIR" "$out/syslib-cases" --system-lib 2>"$out/syslib-cases.log" \
    || { cat "$out/syslib-cases.log" >&2; die "zoo_cases.py --system-lib failed"; }
[ ! -s "$out/syslib-cases/excluded.txt" ] || die "system-library zoo cases left out: $(cat "$out/syslib-cases/excluded.txt")"
static_libs=$(pkg-config --cflags --libs mote-static)
# shellcheck disable=SC2086
gcc "${cflags[@]}" ffi/tests/c/test_zoo.c -o "$out/test_zoo_syslib" \
    -Wl,--whole-archive "$out/libzoo_syslib.a" -Wl,--no-whole-archive $static_libs || die "test_zoo_syslib did not build"
# shellcheck disable=SC2086
gcc "${cflags[@]}" ffi/tests/c/test_system_lib.c -o "$out/test_system_lib_linked" \
    -Wl,--whole-archive "$out/libzoo_syslib.a" -Wl,--no-whole-archive $static_libs || die "test_system_lib did not build"
# shellcheck disable=SC2086
gcc "${cflags[@]}" ffi/tests/c/test_system_lib.c -o "$out/test_system_lib_dropped" \
    "$out/libzoo_syslib.a" $static_libs || die "test_system_lib (dropped) did not build"
check c-system-lib-zoo-valgrind "${vg[@]}" "$out/test_zoo_syslib" "$out/syslib-cases" 4
check c-system-lib-linked "$out/test_system_lib_linked" linked "${syslib_prefixes[@]}"
check c-system-lib-without-whole-archive "$out/test_system_lib_dropped" dropped "${syslib_prefixes[@]}"

# The README's C program, linked through pkg-config, shared and static: raise.so computes 3 * x.
c_example_ok() {
    gcc -std=c11 "${warn[@]}" ffi/examples/c/run.c -o "$out/run_$1" $(pkg-config --cflags --libs "$1") \
        && "$out/run_$1" "$MOTE_ZOO_DIR/raise.so" | tee /dev/stderr | grep -qx 'y\[0\] = 3'
}
check c-example-pkg-config c_example_ok mote
check c-example-pkg-config-static c_example_ok mote-static
# The same program on raise's exec_mode="compiled" build (docs/tvm-format.md §3.6), which
# imports the TVMBackendAnyList functions: from libmote.so, and from the static program's
# exports (pkg-config's flags).
compiled_example_ok() {
    "$out/run_$1" "$MOTE_ZOO_DIR/compiled/raise.so" | tee /dev/stderr | grep -qx 'y\[0\] = 3'
}
check c-example-compiled-mode compiled_example_ok mote
check c-example-compiled-mode-static compiled_example_ok mote-static
# What the header claims for static linking: `pkg-config --libs mote-static` exports the error
# symbol model libraries resolve from the executable, and the static program really exports it.
static_export_ok() {
    pkg-config --libs mote-static | tee /dev/stderr \
        | grep -q -- '--export-dynamic-symbol=TVMFFIErrorSetRaisedFromCStrParts' \
        && nm -D --defined-only "$out/run_mote-static" | grep -qw TVMFFIErrorSetRaisedFromCStrParts \
        && nm -D --defined-only "$out/run_mote-static" | grep -qw TVMBackendAnyListMoveFromPackedReturn
}
check static-exports-error-symbol static_export_ok

# A C++ program built with CMake's find_package, shared and static.
cmake_ok() {
    cmake -S ffi/examples/cpp -B "$out/cmake" -DCMAKE_PREFIX_PATH="$prefix" \
        && cmake --build "$out/cmake" -j 2 \
        && "$out/cmake/run_model" "$MOTE_ZOO_DIR/mlp.so" forward | tee /dev/stderr | grep -q 'out0: shape \[2, 8\]' \
        && "$out/cmake/run_model" "$MOTE_ZOO_DIR/packed.so" main | tee /dev/stderr \
            | grep -qx 'out0: shape \[8\], 32 bytes, first 1' \
        && "$out/cmake/run_model_static" "$MOTE_ZOO_DIR/raise.so" main | grep -q 'out0: shape \[8\]'
}
check cmake-example cmake_ok

echo "ffi checks: $passed passed, $failed failed"
[ "$failed" = 0 ]
