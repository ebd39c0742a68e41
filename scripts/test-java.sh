#!/usr/bin/env bash
# The Java bindings on the desktop JVM: checks that NativeBridge.java, rpc/RpcBridge.java and the
# test-only TestHooks.java match the Rust entries, that the library without features (what
# releases and the inference AAR ship) exports exactly the natives of NativeBridge (no RPC
# entry, no test hook) and holds no mote-rpc code, that the library with the `rpc` feature (the
# RPC app's, the rpc AAR's) exports exactly those of NativeBridge and RpcBridge, runs the rpc
# module's Rust tests (cargo test -p mote-java --features rpc), builds libmote_java with the
# `test-hooks` and `rpc` features (copied to target/java-test/libmote_java.so; the one without
# features to target/java-test/inference/ for WithoutRpcTest), lists the zoo's cases for the
# tests, and runs the JUnit 5 suite through Maven (surefire pinned in bindings-java/java/pom.xml;
# the main classes are first checked against Android API level 24 by animal-sniffer; the local
# repository is $MOTE_CACHE/m2, so only the first run needs the network).
#
#   scripts/test-java.sh            (MOTE_ZOO_DIR: the x86_64 zoo; default: scripts/zoo.sh's;
#                                    MOTE_PYTHON: the TVM 0.27 venv's python, for the zoo's
#                                    manifest and TVM's RPC client and tracker in RpcServerTest;
#                                    default: scripts/venv.sh's;
#                                    MOTE_CORRUPT_DIR: the corrupted-file corpus for
#                                    CorruptFilesTest; default: written into
#                                    target/java-test/corrupt from MOTE_ZOO_DIR and
#                                    MOTE_OFFLOAD_ZOO_DIR, default scripts/offload-zoo.sh's;
#                                    MOTE_OPENCL_ZOO_DIR: the OpenCL zoo for OpenClTest, which
#                                    needs an OpenCL device (POCL, scripts/opencl.sh); default:
#                                    scripts/opencl-zoo.sh's)
#
# Prints "java checks: N passed, M failed" from surefire's reports; exits non-zero on failure.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
ROOT=$(cd "$HERE/.." && pwd -P)
cd "$ROOT"
export MOTE_CACHE="${MOTE_CACHE:-$HOME/.cache/mote}"

log() { echo "test-java: $*" >&2; }
die() { log "$*"; echo "java checks: 0 passed, 1 failed"; exit 1; }

command -v mvn >/dev/null || die "mvn is not installed (apt-get install maven)"
command -v javac >/dev/null || die "javac is not installed (apt-get install openjdk-17-jdk-headless)"

if [ -z "${MOTE_ZOO_DIR:-}" ]; then
    MOTE_ZOO_DIR="$("$HERE/zoo.sh" | tail -n 1)"
fi
[ -f "$MOTE_ZOO_DIR/manifest.json" ] || die "MOTE_ZOO_DIR=$MOTE_ZOO_DIR has no manifest.json (run scripts/zoo.sh)"
if [ -z "${MOTE_OPENCL_ZOO_DIR:-}" ]; then
    MOTE_OPENCL_ZOO_DIR="$("$HERE/opencl-zoo.sh" | tail -n 1)"
fi
[ -f "$MOTE_OPENCL_ZOO_DIR/mlp_cl.so" ] || die "MOTE_OPENCL_ZOO_DIR=$MOTE_OPENCL_ZOO_DIR has no mlp_cl.so (run scripts/opencl-zoo.sh)"
python="${MOTE_PYTHON:-}"
if [ -z "$python" ]; then
    python="$("$HERE/venv.sh" | tail -n 1)/bin/python"
fi
[ -x "$python" ] || die "no Python at $python (set MOTE_PYTHON)"

mkdir -p "$ROOT/target/java-test"
"$HERE/java-natives.sh" --check || die "NativeBridge.java, RpcBridge.java or TestHooks.java drifted from bindings-java/src/{natives,rpc,test_hooks}.rs"

# Javadoc on every public and protected member (doclint fails on a missing comment).
javadoc -Xdoclint:all -quiet -d "$ROOT/target/java-test/javadoc" \
    bindings-java/java/src/main/java/org/mote/*.java bindings-java/java/src/main/java/org/mote/rpc/*.java \
    bindings-java/java/src/main/java/org/mote/tvm4j/*.java bindings-java/java/src/main/java/org/mote/tvm4j/rpc/*.java \
    >"$ROOT/target/java-test/javadoc.log" 2>&1 || { cat "$ROOT/target/java-test/javadoc.log" >&2; die "javadoc -Xdoclint:all failed"; }
if grep -q 'warning' "$ROOT/target/java-test/javadoc.log"; then
    cat "$ROOT/target/java-test/javadoc.log" >&2
    die "javadoc -Xdoclint:all warns (a public member without a comment?)"
fi

# The library without features, as releases and the inference AAR (org.mote:mote-android) build
# it: its JNI exports must be exactly the natives NativeBridge.java declares (none of
# rpc/RpcBridge.java's, none of TestHooks.java's) and it must hold no code of mote-rpc (no
# `mote_rpc::` symbol in its symbol table). With the rpc feature (the RPC app and
# org.mote:mote-android-rpc): exactly NativeBridge's and RpcBridge's, and mote-rpc's code.
# (java-natives.sh built the first already; this only makes sure.)
command -v nm >/dev/null || die "nm is not installed (apt-get install binutils)"
declared() {
    for f in "$@"; do
        prefix=Java_$(sed -e 's|^bindings-java/java/src/[a-z]*/java/||' -e 's/\.java$//' -e 's|/|_|g' <<<"$f")
        grep -oE 'native +[][A-Za-z0-9_.<> ]+ +[A-Za-z0-9_]+ *\(' "$f" | sed -E "s/.* ([A-Za-z0-9_]+) *\($/${prefix}_\1/"
    done | sort
}
jexports() { nm -D --defined-only "$1" | awk '$3 ~ /^Java_/ { print $3 }' | sort; }
# How many symbols of the mote-rpc crate the library's symbol table has (the host builds keep it).
rpc_code() { nm -C "$1" | grep -c 'mote_rpc::' || true; }
core=$(declared bindings-java/java/src/main/java/org/mote/NativeBridge.java)
rpc=$(declared bindings-java/java/src/main/java/org/mote/rpc/RpcBridge.java)
hooks=$(declared bindings-java/java/src/test/java/org/mote/TestHooks.java)
[ -n "$rpc" ] || die "rpc/RpcBridge.java declares no native"

log "checking the exports of libmote_java without features (the inference library)"
cargo build -q --locked -p mote-java --lib || die "cargo build -p mote-java failed"
have=$(jexports "$ROOT/target/debug/libmote_java.so")
[ "$have" = "$core" ] || die "libmote_java.so without features exports other JNI entries than NativeBridge declares: $(diff <(echo "$core") <(echo "$have") | grep '^[<>]' | tr '\n' ' ')"
n=$(rpc_code "$ROOT/target/debug/libmote_java.so")
[ "$n" = 0 ] || die "libmote_java.so without features holds $n mote_rpc:: symbols (the RPC server must not be in the inference library)"
log "$(wc -l <<<"$have") JNI exports without features, none of RpcBridge's $(wc -l <<<"$rpc") nor of TestHooks' $(wc -l <<<"$hooks"); no mote_rpc code"
# A copy for WithoutRpcTest (the org.mote.rpc classes against the inference library).
mkdir -p "$ROOT/target/java-test/inference"
norpc="$ROOT/target/java-test/inference/libmote_java.so"
cp "$ROOT/target/debug/libmote_java.so" "$norpc.tmp" && mv "$norpc.tmp" "$norpc" || die "cannot copy libmote_java.so"

log "checking the exports of libmote_java with the rpc feature"
cargo build -q --locked -p mote-java --lib --features rpc || die "cargo build -p mote-java --features rpc failed"
have=$(jexports "$ROOT/target/debug/libmote_java.so")
want=$(sort <<<"$core"$'\n'"$rpc")
[ "$have" = "$want" ] || die "libmote_java.so with rpc exports other JNI entries than NativeBridge and RpcBridge declare: $(diff <(echo "$want") <(echo "$have") | grep '^[<>]' | tr '\n' ' ')"
n=$(rpc_code "$ROOT/target/debug/libmote_java.so")
[ "$n" -gt 0 ] || die "libmote_java.so with rpc holds no mote_rpc:: symbol (is the check looking at the right file?)"
log "$(wc -l <<<"$have") JNI exports with rpc, $n mote_rpc:: symbols"

# The Rust unit tests of the rpc module (src/rpc.rs), which `cargo test --workspace` (no
# features) does not build.
rlog="$ROOT/target/java-test/cargo-test-rpc.log"
cargo test --locked -p mote-java --lib --features rpc >"$rlog" 2>&1 \
    || { cat "$rlog" >&2; die "cargo test -p mote-java --features rpc failed"; }
grep -qE '^test rpc::tests::a_stopped_snapshot_reads_back \.\.\. ok$' "$rlog" \
    || { cat "$rlog" >&2; die "cargo test -p mote-java --features rpc did not run the rpc module's tests"; }
log "cargo test -p mote-java --lib --features rpc: $(grep -E '^test result:' "$rlog" | tail -n 1)"

log "building libmote_java with the test-hooks and rpc features"
cargo build -q --locked -p mote-java --features test-hooks,rpc || die "cargo build -p mote-java --features test-hooks,rpc failed"
# A copy, so a build with other features in the same target/ (scripts/test-android-app.sh, the
# Android scripts' host steps) cannot swap the file under the tests.
mkdir -p "$ROOT/target/java-test"
lib="$ROOT/target/java-test/libmote_java.so"
cp "$ROOT/target/debug/libmote_java.so" "$lib.tmp" && mv "$lib.tmp" "$lib" || die "cannot copy libmote_java.so"
missing=$(comm -23 <(echo "$hooks") <(jexports "$lib"))
[ -z "$missing" ] || die "the test-hooks build lacks: $missing"

# The C test plug-in (tests/plugins/test_plugin.c), with the right ABI version and a wrong one.
command -v cc >/dev/null || die "no C compiler (cc) for the test plug-in"
for v in good bad; do
    extra=(); [ "$v" = bad ] && extra=(-DTEST_PLUGIN_ABI_VERSION=99)
    cc -shared -fPIC -O2 -std=c99 -Wall -Wextra -Werror -I runtime/include "${extra[@]}" \
        tests/plugins/test_plugin.c -o "$ROOT/target/java-test/libmote_test_plugin_$v.so" \
        || die "cannot compile the test plug-in"
done

# Statically linked models (docs/system-lib.md): the zoo's system-library objects linked whole
# into one shared library that depends on libmote_java.so, as an app's own JNI library would
# (SystemLibTest loads it, then each model by prefix).
data="$ROOT/target/java-test"
syslib=$("$python" - "$MOTE_ZOO_DIR/manifest.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
print(" ".join(f"{x['name']}:{x['system_lib']['archive']}" for x in m["models"] if "system_lib" in x))
PY
)
[ -n "$syslib" ] || die "the zoo at $MOTE_ZOO_DIR has no system-library builds (rebuild it: scripts/zoo.sh)"
rm -rf "$data/syslib-objs"
syslib_models=()
for entry in $syslib; do
    name=${entry%%:*}
    mkdir -p "$data/syslib-objs/$name"
    tar -xf "$MOTE_ZOO_DIR/${entry#*:}" -C "$data/syslib-objs/$name" || die "cannot unpack ${entry#*:}"
    syslib_models+=("$name")
done
# No SONAME on the host libmote_java.so: naming it by its absolute path records that path as
# NEEDED, which the loader matches to the copy the JVM already loaded (no second Mote).
cc -shared -o "$data/libzoo_syslib.so" -Wl,--whole-archive "$data"/syslib-objs/*/*.o \
    -Wl,--no-whole-archive "$lib" -lm -Wl,-z,defs || die "cannot link the system-library models"
syslib_list=$(IFS=,; echo "${syslib_models[*]}")

# The manifest as one tab-separated line per case, so the tests need no JSON library:
# model file kind case function mode expect_error inputs expected rtol atol outputs scalars functions
data="$ROOT/target/java-test"
mkdir -p "$data"
"$python" - "$MOTE_ZOO_DIR/manifest.json" >"$data/zoo-cases.tsv" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
def s(v):
    return "-" if v is None or v == "" else str(v)
def lst(v):
    return ",".join(str(x) for x in v) if v else "-"
for model in m["models"]:
    for c in model["cases"]:
        tol = c.get("tolerance") or {}
        print("\t".join([model["name"], model["file"], model["kind"], c["case"], c["function"],
                         c["mode"], s(c.get("expect_error")), s(c.get("inputs")),
                         s(c.get("expected")), s(tol.get("rtol")), s(tol.get("atol")),
                         lst(c.get("outputs")), lst(c.get("scalars")),
                         lst(model.get("functions"))]))
PY
log "$(wc -l <"$data/zoo-cases.tsv") zoo cases listed"

# The corrupted-file corpus (docs/fuzzing.md, "Corrupted files") for CorruptFilesTest:
# MOTE_CORRUPT_DIR when set, else written here the way scripts/test-corrupt.sh writes it.
if [ -z "${MOTE_CORRUPT_DIR:-}" ]; then
    ozoo="${MOTE_OFFLOAD_ZOO_DIR:-}"
    if [ -z "$ozoo" ]; then
        ozoo="$("$HERE/offload-zoo.sh" --target x86_64 | tail -n 1)" || die "scripts/offload-zoo.sh failed"
    fi
    [ -f "$ozoo/manifest.json" ] || die "no offload zoo at $ozoo (set MOTE_OFFLOAD_ZOO_DIR)"
    # shellcheck source=lib/corrupt-corpus.sh
    . "$HERE/lib/corrupt-corpus.sh"
    write_corrupt_corpus "$data/corrupt" "$MOTE_ZOO_DIR" "$ozoo" || die "cannot write the corrupted-file corpus"
    MOTE_CORRUPT_DIR="$data/corrupt"
fi
[ -f "$MOTE_CORRUPT_DIR/corpus.tsv" ] || die "MOTE_CORRUPT_DIR=$MOTE_CORRUPT_DIR has no corpus.tsv"
MOTE_CORRUPT_DIR=$(cd "$MOTE_CORRUPT_DIR" && pwd -P)   # Maven runs in bindings-java/java
log "$(wc -l <"$MOTE_CORRUPT_DIR/corpus.tsv") corrupted copies in $MOTE_CORRUPT_DIR"

m2="$MOTE_CACHE/m2"
offline=()
# Offline once every plug-in is there (animal-sniffer and its Android API 24 signature too).
[ -d "$m2/org/apache/maven/surefire/surefire-junit-platform" ] \
    && [ -d "$m2/net/sf/androidscents/signature/android-api-level-24" ] \
    && [ -d "$m2/org/codehaus/mojo/animal-sniffer-maven-plugin" ] && offline=(-o)
rm -rf bindings-java/java/target/surefire-reports
status=0
(cd bindings-java/java && mvn -q -B -Dstyle.color=never "${offline[@]}" -Dmaven.repo.local="$m2" \
    -Dmote.library="$lib" -Dmote.zoo="$MOTE_ZOO_DIR" -Dmote.cases="$data/zoo-cases.tsv" \
    -Dmote.testPlugin="$data/libmote_test_plugin_good.so" -Dmote.testPluginBadAbi="$data/libmote_test_plugin_bad.so" \
    -Dmote.syslibLibrary="$data/libzoo_syslib.so" -Dmote.syslibModels="$syslib_list" \
    -Dmote.corrupt="$MOTE_CORRUPT_DIR" -Dmote.python="$python" -Dmote.openclZoo="$MOTE_OPENCL_ZOO_DIR" \
    -Dmote.libraryWithoutRpc="$norpc" test) 2>&1 \
    | sed 's/\x1b\[[0-9;]*m//g' || status=$?

reports=bindings-java/java/target/surefire-reports
# shellcheck source=scripts/lib/surefire-summary.sh
. "$ROOT/scripts/lib/surefire-summary.sh"
surefire_summary "java" "$reports" "$status" "$python"
