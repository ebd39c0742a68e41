#!/usr/bin/env bash
# Selective builds (docs/footprint.md, "Selective builds"): scripts/build-selective.sh's choice
# of features, and a Mote built without the cpu backend running what it still can.
#
#   scripts/test-selective.sh          (MOTE_ZOO_DIR / MOTE_OFFLOAD_ZOO_DIR / MOTE_OPENCL_ZOO_DIR
#                                       reused when set)
#
# Checks:
# - `build-selective.sh --print-features`: every x86_64 zoo model (all compiled code) needs no
#   feature; every offload zoo model, `.so` and `.tar` (code-free ones hold their blob as a C
#   array), needs `cpu-backend` (which implies `offload`); both together need `cpu-backend`; a
#   file that is not a model archive is an error (exit 2), not a guess; every OpenCL zoo model
#   needs `opencl` and nothing else.
# - the CLI built with `--no-default-features` (no offloaded subgraphs, no cpu backend, no
#   avx512 level) runs every `call` case of the x86_64 zoo (but `packed`, which needs a
#   function the tests register) and matches its expected outputs within the case's tolerance;
#   on every offload zoo `.so` `run` and `inspect` (which only loads) exit 1 with an `error:`
#   line naming the `offload` feature (a typed Error::Unsupported when the model loads, no
#   panic); `inspect --code-free` of a compiled model exits 1 naming the same feature (reading
#   a model as data is left out with offloaded subgraphs); and (built without `opencl` too) on
#   every OpenCL zoo model it exits 1 with an `error:` line naming the `opencl` feature
#   (Error::Device).
# - `build-selective.sh --target android-arm64` for a compiled model: the JNI library passes
#   scripts/audit-android-so.sh (the AAR library's audit) and holds none of the string
#   literals that only the left-out code uses (fat LTO inlines across crates, so the symbol
#   table cannot tell): the cpu backend's (two op messages), the offloaded subgraphs'
#   description parser, executor and plug-in loader and the object-file reader's (which the
#   `offload` feature's early answers leave unreachable), OpenCL's entry-point names (which the
#   `opencl` feature's early errors leave unreachable; docs/footprint.md); a control string of
#   the VM must be found; no string names a `.rs` file (panic locations left out). Its AAR
#   (`--aar`): one library, the stripped one, for arm64-v8a.
# Prints `selective checks: N passed, M failed`; exit status 1 if any failed.
set -uo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
die() { echo "test-selective.sh: error: $*" >&2; exit 1; }
# shellcheck source=lib/checks.sh
. scripts/lib/checks.sh
zoo="${MOTE_ZOO_DIR:-$(scripts/zoo.sh --target x86_64 | tail -n 1)}"
ozoo="${MOTE_OFFLOAD_ZOO_DIR:-$(scripts/offload-zoo.sh --target x86_64 | tail -n 1)}"
clzoo="${MOTE_OPENCL_ZOO_DIR:-$(scripts/opencl-zoo.sh | tail -n 1)}"
[ -f "$zoo/manifest.json" ] && [ -f "$ozoo/manifest.json" ] || die "no zoo ($zoo) or offload zoo ($ozoo)"
[ -f "$clzoo/manifest.json" ] || die "no OpenCL zoo ($clzoo)"
py="${MOTE_PYTHON:-$(scripts/venv.sh | tail -n 1)/bin/python}"
[ -x "$py" ] || die "no Python with numpy ($py)"
work=$(mktemp -d)
android_pid=""
trap '[ -z "$android_pid" ] || kill "$android_pid" 2>/dev/null; rm -rf "$work"' EXIT

# 1. The feature choice.
features_of() { scripts/build-selective.sh --print-features "$@" 2>"$work/sel.err"; }
n=0 bad=""
for f in "$zoo"/*.so; do
    n=$((n + 1)); got=$(features_of "$f") || got="(exit $?)"
    [ -z "$got" ] || bad="$bad $(basename "$f")=$got"
done
check "compiled zoo models need no feature ($n files)" "$([ -z "$bad" ] && [ "$n" -gt 0 ]; echo $?)" "${bad:-none}"
n=0 bad=""
for f in "$ozoo"/*.so "$ozoo"/*.tar; do
    n=$((n + 1)); got=$(features_of "$f") || got="(exit $?)"
    [ "$got" = cpu-backend ] || bad="$bad $(basename "$f")=$got"
done
check "offload zoo models need cpu-backend ($n files, .so and .tar)" "$([ -z "$bad" ] && [ "$n" -gt 0 ]; echo $?)" "${bad:-all}"
n=0 bad=""
for f in "$clzoo"/*.so; do
    n=$((n + 1)); got=$(features_of "$f") || got="(exit $?)"
    [ "$got" = opencl ] || bad="$bad $(basename "$f")=$got"
done
check "OpenCL zoo models need opencl ($n files)" "$([ -z "$bad" ] && [ "$n" -gt 0 ]; echo $?)" "${bad:-all}"
first_offload=$(ls "$ozoo"/*.so | head -n 1)
got=$(features_of "$zoo/mlp.so" "$first_offload") || got="(exit $?)"
check "a compiled and an offloaded model together need cpu-backend" "$([ "$got" = cpu-backend ]; echo $?)" "$got"
printf 'not a model' >"$work/junk.tar"
features_of "$work/junk.tar" >/dev/null; rc=$?
check "an unreadable archive is an error" "$([ "$rc" = 2 ] && grep -q 'cannot read model' "$work/sel.err"; echo $?)" "exit $rc"

# The selective Android library of part 3 builds in the background meanwhile (in the chroot's
# cargo folder: one codegen unit keeps one core busy while part 2 uses the other).
scripts/build-selective.sh --target android-arm64 --aar "$zoo/cnn.so" >"$work/android.out" 2>"$work/android.log" &
android_pid=$!

# 2. The CLI without the cpu backend.
echo "test-selective.sh: building mote-cli --no-default-features (target/selective)" >&2
CARGO_TARGET_DIR="$root/target/selective" cargo build -q --locked -p mote-cli --no-default-features >&2 \
    || die "cargo build -p mote-cli --no-default-features failed"
mote="$root/target/selective/debug/mote"
"$py" - "$zoo" "$mote" "$work" >"$work/zoo.txt" 2>&1 <<'PY'
import json, subprocess, sys
import numpy as np
zoo, mote, work = sys.argv[1:4]
manifest = json.load(open(f"{zoo}/manifest.json"))
# `packed` calls a global function Mote's tests register (the CLI has none to offer).
for m in manifest["models"]:
    if m["name"] == "packed":
        continue
    for c in m["cases"]:
        if c["mode"] != "call" or c["expect_error"] is not None:
            continue
        name = f"{m['name']}.{c['case']}"
        out = f"{work}/{name}.npz"
        r = subprocess.run([mote, "run", f"{zoo}/{m['file']}", "-f", c["function"],
                            "--inputs", f"{zoo}/{c['inputs']}", "--output", out],
                           capture_output=True, text=True, timeout=300)
        ok, detail = r.returncode == 0, f"exit {r.returncode}: {r.stderr.strip()[-300:]}"
        if ok:
            got, want = np.load(out), np.load(f"{zoo}/{c['expected']}")
            tol = c.get("tolerance") or {"rtol": 1e-5, "atol": 1e-5}
            keys = sorted(want.keys())
            ok = sorted(got.keys()) == keys and all(
                got[k].shape == want[k].shape and np.allclose(got[k], want[k], **tol) for k in keys)
            detail = f"{len(keys)} outputs match" if ok else f"outputs differ (keys {sorted(got.keys())} vs {keys})"
        print(("PASS" if ok else "FAIL") + f"|without cpu-backend, zoo case {name}|{detail}")
PY
[ -s "$work/zoo.txt" ] || die "the zoo runner printed nothing"
ran=0
while IFS='|' read -r verdict what detail; do
    case "$verdict" in PASS|FAIL) ;; *) echo "$verdict $what $detail" >&2; check "zoo runner output" 1 "$verdict"; continue ;; esac
    ran=$((ran + 1))
    check "$what" "$([ "$verdict" = PASS ]; echo $?)" "$detail"
done <"$work/zoo.txt"
check "zoo call cases run without cpu-backend" "$([ "$ran" -ge 10 ]; echo $?)" "$ran cases"

n=0 nbad=0 bad=""
# Each offload zoo model with its first case (file, function, inputs): a case's name is not
# its function's (the symbolic models' cases are lengths: `n1`, `seq6`, ...).
while IFS='|' read -r file fn inputs; do
    n=$((n + 1))
    base=$(basename "$file" .so)
    args=(run "$ozoo/$file" -f "$fn")
    [ -n "$inputs" ] && args+=(--inputs "$ozoo/$inputs")
    timeout 60 "$mote" "${args[@]}" >/dev/null 2>"$work/err.txt"; rc=$?
    # `inspect` only loads: the model is refused when it loads, not when a region first runs.
    timeout 60 "$mote" inspect "$ozoo/$file" >/dev/null 2>>"$work/err.txt"; rc2=$?
    [ "$rc2" = 1 ] || rc="$rc, inspect $rc2"
    if [ "$rc" != 1 ] || [ "$(grep -c '^error:.*without its `offload` feature' "$work/err.txt")" != 2 ]; then
        nbad=$((nbad + 1))
        [ "$nbad" -gt 2 ] || bad="$bad $base(exit $rc: $(head -c 300 "$work/err.txt"))"
    fi
done < <("$py" - "$ozoo/manifest.json" <<'PY'
import json, sys
for m in json.load(open(sys.argv[1]))["models"]:
    c = (m.get("cases") or [{}])[0]
    print(f"{m['file']}|{c.get('function', 'main')}|{c.get('inputs') or ''}")
PY
)
check "offloaded models without offload and cpu-backend: exit 1 at load naming the offload feature ($n files)" \
    "$([ "$nbad" = 0 ] && [ "$n" -gt 0 ]; echo $?)" "${bad:+$nbad failed, e.g.$bad}"
# Reading a model as data is for models whose every operator is offloaded: left out with them.
timeout 60 "$mote" inspect --code-free "$zoo/mlp.so" >/dev/null 2>"$work/err.txt"; rc=$?
check "a code-free read without offload: exit 1 naming the offload feature" \
    "$([ "$rc" = 1 ] && grep -q '^error:.*code-free.*without its `offload` feature' "$work/err.txt"; echo $?)" "exit $rc: $(head -c 300 "$work/err.txt")"

n=0 nbad=0 bad=""
# Each OpenCL model with its first case that expects an output: (file, function, inputs).
while IFS='|' read -r file fn inputs; do
    n=$((n + 1))
    base=$(basename "$file" .so)
    timeout 60 "$mote" run "$clzoo/$file" -f "$fn" --inputs "$clzoo/$inputs" >/dev/null 2>"$work/err.txt"; rc=$?
    if [ "$rc" != 1 ] || ! grep -q '^error:.*`opencl` feature' "$work/err.txt"; then
        nbad=$((nbad + 1))
        [ "$nbad" -gt 2 ] || bad="$bad $base(exit $rc: $(head -c 300 "$work/err.txt"))"
    fi
done < <("$py" - "$clzoo/manifest.json" <<'PY'
import json, sys
for m in json.load(open(sys.argv[1]))["models"]:
    for c in m["cases"]:
        if c.get("expected") and not c.get("expect_error") and c.get("inputs"):
            print(f"{m['file']}|{c['function']}|{c['inputs']}")
            break
PY
)
check "OpenCL models without opencl: exit 1 naming the feature ($n files)" \
    "$([ "$nbad" = 0 ] && [ "$n" -gt 0 ]; echo $?)" "${bad:+$nbad failed, e.g.$bad}"

# 3. The Android JNI library, selective: what `--target android-arm64` builds for a compiled
# model passes the AAR library's audit and holds none of the cpu backend's code.
wait "$android_pid"; android_rc=$?; android_pid=""
if [ "$android_rc" = 0 ] && lib=$(tail -n 1 "$work/android.out") && [ -f "$lib" ]; then
    audit=$(scripts/audit-android-so.sh --abi arm64-v8a "$lib" 2>&1); rc=$?
    check "selective arm64 JNI library passes the AAR library's audit" "$rc" "$(grep -E '^(FAIL|android so checks)' <<<"$audit" | head -n 3 | tr '\n' ' ')"
    # Built with fat LTO (scripts/build-selective.sh), code is inlined across crates, so its
    # symbol table cannot show what is absent; the string literals only the left-out code uses
    # can (each is in the full library). The control, a message of the VM's interpreter, must
    # be found, or the search itself is broken.
    found() { local s out=""; for s in "$@"; do grep -q -a -F -- "$s" "$lib.stripped" && out+=" \"$s\""; done; echo "$out"; }
    n=$(found "ran past the end of the function")
    check "selective arm64 JNI library: the control string is found in it" "$([ -n "$n" ]; echo $?)" \
        "stripped $(stat -c %s "$lib.stripped") bytes"
    n=$(found "transpose: buffer sizes do not match the shape" "channel_shuffle: buffer sizes do not match the shape")
    check "selective arm64 JNI library holds no cpu backend code" "$([ -z "$n" ]; echo $?)" "${n:+found:$n}"
    n=$(found "the node name is not unique" "two output buffers overlap" "mote_backend_graph_add_tensor" \
        "a gzip file that does not hold a tar archive" "is larger than its section")
    check "selective arm64 JNI library holds no offloaded-subgraph parser, executor, plug-in loader or object-file reader" \
        "$([ -z "$n" ]; echo $?)" "${n:+found:$n}"
    n=$(found "clEnqueueNDRangeKernel" "clBuildProgram")
    check "selective arm64 JNI library holds no OpenCL launch, build or discovery code" "$([ -z "$n" ]; echo $?)" "${n:+found:$n}"
    # -Zlocation-detail=none: no panic location names a source file (the full library has dozens).
    n=$(strings -a "$lib.stripped" | grep -cE '\.rs(:|$)' || true)
    check "selective arm64 JNI library: panic locations carry no source file names" "$([ "$n" = 0 ]; echo $?)" "$n found"
    aar=target/android-repo-selective/org/mote/mote-android/0.1.0/mote-android-0.1.0.aar
    entries=$(unzip -Z1 "$aar" 2>&1 | grep -v '/$' | sort | tr '\n' ' ')
    want="AndroidManifest.xml R.txt classes.jar jni/arm64-v8a/libmote_java.so proguard.txt "
    rc=1
    if [ "$entries" = "$want" ] && unzip -p "$aar" jni/arm64-v8a/libmote_java.so | cmp -s - "$lib.stripped"; then rc=0; fi
    check "selective AAR (--aar): arm64-v8a only, the stripped library" "$rc" "$(stat -c %s "$aar" 2>/dev/null) bytes; entries: $entries"
else
    tail -n 20 "$work/android.log" >&2
    check "selective arm64 JNI library built (scripts/build-selective.sh --target android-arm64)" 1
fi

checks_summary selective
