#!/usr/bin/env bash
# tvm4j's own JUnit tests (apache/tvm jvm/core/src/test/java/org/apache/tvm/) against Mote's
# tvm4j layer (bindings-java, package org.mote.tvm4j), changed only in their package line and
# imports (org.apache.tvm / ml.dmlc.tvm -> org.mote.tvm4j).
#
#   scripts/peer/java.sh --tvm-src DIR [--compat-out FILE]
#
# DIR is a checkout of apache/tvm. Apache's sources are never copied into this repository:
# everything happens in a temporary directory outside it, removed at exit.
#
#   1. Takes the newest FunctionTest, ModuleTest, TensorTest, TestUtils and rpc/RPCTest from
#      DIR's files, and, when DIR is a git checkout with the tag v0.21.0, the v0.21.0 ones
#      (FunctionTest, ModuleTest, NDArrayTest, TestUtils, rpc/RPCTest: the API before the
#      array class was renamed Tensor) through `git -C DIR show`. Without git metadata it says
#      so and runs the newest only. The rename touches package and import lines only; a
#      check fails the run if any other line changed.
#   2. Builds the test libraries (add_cpu.so, add_relax.so; add_cuda.so only with CUDA) with
#      tvm4j's own jvm/core/src/test/scripts/prepare_test_libs.py, unchanged, run by the
#      TVM 0.27 venv's python (MOTE_PYTHON, default scripts/venv.sh's).
#   3. Builds libmote_java (cargo build -p mote-java, no features) and the Mote jar (javac of
#      bindings-java/java/src/main/java), and resolves JUnit 4.13.2, hamcrest-core 1.3,
#      slf4j-api and slf4j-simple 1.7.36 from $MOTE_CACHE/m2 (~/.cache/mote/m2), fetching
#      them from Maven Central with `mvn dependency:get` only when missing.
#   4. Runs each set (newest, v0.21.0) in its own JVM under JUnit 4 with
#      -Dtest.tempdir=<the libraries' dir>. The two sets share class names, hence two runs.
#      RPCTest is @Ignore'd upstream: it must compile, and counts as skipped.
#   6. Runs each set's RPCTest again with its @Ignore annotations removed (the only change,
#      checked), against Mote's Java RPC client and server, with TVM's own rpc_proxy for the
#      proxy test; reported apart in the final line.
#
#   5. With --compat-out, compiles tvm4j's own main sources (newest, and v0.21.0 when there)
#      and writes FILE: every public tvm4j member as same, different or missing in
#      org.mote.tvm4j (scripts/peer/tvm4j_compat.py; docs/tvm4j-compat.md is this file).
#
# Prints one final line on stdout:
#   peer java: N passed, M failed, K skipped (newest: ...; v0.21.0: ...)
# and exits non-zero on any failure (a failing test, or a step that could not run).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
ROOT=$(cd "$HERE/../.." && pwd -P)
export MOTE_CACHE="${MOTE_CACHE:-$HOME/.cache/mote}"

log() { echo "peer/java: $*" >&2; }
die() {
    log "error: $*"
    echo "peer java: 0 passed, 1 failed, 0 skipped (not run: $*)"
    exit 1
}
usage() {
    sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//' >&2
    exit 2
}

src=""
compat_out=""
while [ $# -gt 0 ]; do
    case "$1" in
        --compat-out) [ $# -ge 2 ] || usage; compat_out=$2; shift 2 ;;
        --tvm-src) [ $# -ge 2 ] || usage; src=$2; shift 2 ;;
        --tvm-src=*) src=${1#--tvm-src=}; shift ;;
        -h|--help) usage ;;
        *) log "unknown argument: $1"; usage ;;
    esac
done
[ -n "$src" ] || usage
[ -d "$src" ] || die "--tvm-src $src is not a directory"
src=$(cd "$src" && pwd -P)
tests_dir="jvm/core/src/test/java/org/apache/tvm"
prepare="$src/jvm/core/src/test/scripts/prepare_test_libs.py"
[ -f "$src/$tests_dir/FunctionTest.java" ] || die "$src has no $tests_dir/FunctionTest.java (not an apache/tvm checkout?)"
[ -f "$prepare" ] || die "$src has no jvm/core/src/test/scripts/prepare_test_libs.py"

for tool in javac java jar cargo; do
    command -v "$tool" >/dev/null || die "$tool is not installed"
done
python="${MOTE_PYTHON:-}"
if [ -z "$python" ]; then
    python="$("$ROOT/scripts/venv.sh" | tail -n 1)/bin/python"
fi
[ -x "$python" ] || die "no Python at $python (set MOTE_PYTHON to the TVM 0.27 venv's python)"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/mote-peer-java.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
case "$tmp/" in
    "$ROOT"/*) die "the temporary directory $tmp is inside the repository" ;;
esac

# --- 1. Apache's tests, renamed ------------------------------------------------------------
# Only `package` and `import` lines change; anything else would be a modified test.
rename() { # rename <in> <out>
    mkdir -p "$(dirname "$2")"
    sed -E -e '/^[[:space:]]*(package|import)[[:space:]]/ {
        s/(^|[^A-Za-z0-9_.])org\.apache\.tvm(\.|;|[[:space:]]|$)/\1org.mote.tvm4j\2/g
        s/(^|[^A-Za-z0-9_.])ml\.dmlc\.tvm(\.|;|[[:space:]]|$)/\1org.mote.tvm4j\2/g
    }' "$1" >"$2"
    local other
    other=$(diff "$1" "$2" | grep -E '^[<>]' | grep -vE '^[<>][[:space:]]*(package|import)[[:space:]]' || true)
    [ -z "$other" ] || die "renaming $(basename "$1") changed more than package and import lines: $other"
}

newest_classes=(FunctionTest ModuleTest TensorTest rpc.RPCTest)
old_classes=(FunctionTest ModuleTest NDArrayTest rpc.RPCTest)
sets=(newest)
mkdir -p "$tmp/apache/newest" "$tmp/apache/v0.21.0"
for f in FunctionTest ModuleTest TensorTest TestUtils rpc/RPCTest; do
    [ -f "$src/$tests_dir/$f.java" ] || die "$src has no $tests_dir/$f.java"
    cp "$src/$tests_dir/$f.java" "$tmp/apache/newest/$(basename "$f").java"
    rename "$src/$tests_dir/$f.java" "$tmp/src/newest/org/mote/tvm4j/$f.java"
done
old_note=""
if git -C "$src" rev-parse --git-dir >/dev/null 2>&1; then
    if tag=$(git -C "$src" rev-parse --verify -q 'refs/tags/v0.21.0^{commit}'); then
        for f in FunctionTest ModuleTest NDArrayTest TestUtils rpc/RPCTest; do
            git -C "$src" show "$tag:$tests_dir/$f.java" >"$tmp/apache/v0.21.0/$(basename "$f").java" \
                || die "git -C $src show v0.21.0:$tests_dir/$f.java failed"
            rename "$tmp/apache/v0.21.0/$(basename "$f").java" "$tmp/src/v0.21.0/org/mote/tvm4j/$f.java"
        done
        sets+=(v0.21.0)
    else
        old_note="v0.21.0: not run, $src has no tag v0.21.0 (git fetch --tags)"
        log "$old_note"
    fi
else
    old_note="v0.21.0: not run, $src has no git metadata"
    log "$src has no git metadata: running the newest tests only (the v0.21.0 ones come from git)"
fi

# --- 2. tvm4j's test libraries, by tvm4j's own script ---------------------------------------
libs="$tmp/libs"
mkdir -p "$libs"
log "building the test libraries with $prepare"
"$python" "$prepare" "$libs" >"$tmp/prepare.log" 2>&1 || { cat "$tmp/prepare.log" >&2; die "prepare_test_libs.py failed"; }
[ -f "$libs/add_cpu.so" ] || die "prepare_test_libs.py wrote no add_cpu.so"
log "test libraries: $(cd "$libs" && echo *)"

# --- 3. Mote: libmote_java, the jar, and JUnit 4 --------------------------------------------
log "building libmote_java (cargo build -p mote-java --features rpc: tvm4j's tests start RPC servers)"
(cd "$ROOT" && cargo build -q --locked -p mote-java --features rpc --lib) || die "cargo build -p mote-java --features rpc failed"
cp "$ROOT/target/debug/libmote_java.so" "$tmp/libmote_java.so"
log "building the Mote jar"
mkdir -p "$tmp/mote-classes"
find "$ROOT/bindings-java/java/src/main/java" -name '*.java' >"$tmp/mote-sources"
javac --release 11 -nowarn -d "$tmp/mote-classes" @"$tmp/mote-sources" 2>"$tmp/javac-mote.log" \
    || { cat "$tmp/javac-mote.log" >&2; die "javac of the Mote jar failed"; }
jar cf "$tmp/mote.jar" -C "$tmp/mote-classes" .

# --- 5 (here, once the Mote classes exist). The compatibility table --------------------------
if [ -n "$compat_out" ]; then
    log "compiling tvm4j's own classes for the compatibility table"
    compat_sets=()
    mkdir -p "$tmp/apache-main/newest"
    cp -r "$src/jvm/core/src/main/java/." "$tmp/apache-main/newest/"
    if [ -n "${tag:-}" ]; then
        mkdir -p "$tmp/apache-main/v0.21.0"
        git -C "$src" archive "$tag" jvm/core/src/main/java | tar -x -C "$tmp/apache-main/v0.21.0" \
            || die "git archive of v0.21.0's jvm/core/src/main/java failed"
        mv "$tmp/apache-main/v0.21.0/jvm/core/src/main/java" "$tmp/apache-main/v0.21.0-src"
        rm -rf "$tmp/apache-main/v0.21.0"
        mv "$tmp/apache-main/v0.21.0-src" "$tmp/apache-main/v0.21.0"
    fi
    for set in newest v0.21.0; do
        [ -d "$tmp/apache-main/$set" ] || continue
        find "$tmp/apache-main/$set" -name '*.java' >"$tmp/apache-main/$set.sources"
        javac --release 11 -nowarn -d "$tmp/apache-classes/$set" @"$tmp/apache-main/$set.sources" \
            >"$tmp/javac-apache-$set.log" 2>&1 || { cat "$tmp/javac-apache-$set.log" >&2; die "javac of tvm4j's $set classes failed"; }
        compat_sets+=(--set "$set=$tmp/apache-classes/$set")
    done
    python3 "$HERE/tvm4j_compat.py" --mote "$tmp/mote-classes" "${compat_sets[@]}" --out "$compat_out" \
        2>"$tmp/compat.log" || { cat "$tmp/compat.log" >&2; die "the compatibility table failed"; }
    log "compatibility: $(cat "$tmp/compat.log") -> $compat_out"
fi

m2="$MOTE_CACHE/m2"
deps=(junit:junit:4.13.2 org.hamcrest:hamcrest-core:1.3 org.slf4j:slf4j-api:1.7.36 org.slf4j:slf4j-simple:1.7.36)
cp_deps=""
for d in "${deps[@]}"; do
    IFS=: read -r g a v <<<"$d"
    j="$m2/${g//.//}/$a/$v/$a-$v.jar"
    if [ ! -f "$j" ]; then
        command -v mvn >/dev/null || die "$d is not in $m2 and mvn is not installed to fetch it"
        log "fetching $d from Maven Central into $m2"
        mvn -q -B -Dstyle.color=never -Dmaven.repo.local="$m2" \
            org.apache.maven.plugins:maven-dependency-plugin:3.8.1:get -Dartifact="$d" -Dtransitive=false \
            >"$tmp/mvn.log" 2>&1 || { cat "$tmp/mvn.log" >&2; die "cannot fetch $d"; }
        [ -f "$j" ] || die "mvn fetched $d but $j is missing"
    fi
    cp_deps="$cp_deps:$j"
done
cp_deps=${cp_deps#:}

# A JUnit 4 runner that reports each test (ours, not Apache's): PASS/FAIL/SKIP lines, then
# "counts: passed failed skipped".
mkdir -p "$tmp/runner-src" "$tmp/runner"
cat >"$tmp/runner-src/PeerRunner.java" <<'JAVA'
import org.junit.runner.Description;
import org.junit.runner.JUnitCore;
import org.junit.runner.Request;
import org.junit.runner.notification.Failure;
import org.junit.runner.notification.RunListener;

public final class PeerRunner {
    public static void main(String[] args) throws Exception {
        final int[] n = new int[3]; // passed, failed, skipped
        JUnitCore core = new JUnitCore();
        core.addListener(new RunListener() {
            private boolean failed;

            @Override
            public void testStarted(Description d) {
                failed = false;
            }

            @Override
            public void testFailure(Failure f) {
                failed = true;
                n[1]++;
                System.out.println("FAIL " + f.getDescription().getDisplayName() + ": " + f.getMessage());
                System.out.println(f.getTrace());
            }

            @Override
            public void testAssumptionFailure(Failure f) {
                failed = true;
                n[2]++;
                System.out.println("SKIP " + f.getDescription().getDisplayName() + ": " + f.getMessage());
            }

            @Override
            public void testIgnored(Description d) {
                n[2]++;
                System.out.println("SKIP " + d.getDisplayName() + " (@Ignore)");
            }

            @Override
            public void testFinished(Description d) {
                if (!failed) {
                    n[0]++;
                    System.out.println("PASS " + d.getDisplayName());
                }
            }
        });
        for (String c : args) {
            core.run(Request.aClass(Class.forName(c)));
        }
        System.out.println("counts: " + n[0] + " " + n[1] + " " + n[2]);
    }
}
JAVA
javac --release 11 -cp "$cp_deps" -d "$tmp/runner" "$tmp/runner-src/PeerRunner.java" 2>"$tmp/javac-runner.log" \
    || { cat "$tmp/javac-runner.log" >&2; die "javac of the JUnit runner failed"; }

# --- 4. The runs -----------------------------------------------------------------------------
total_p=0 total_f=0 total_s=0
parts=()
for set in "${sets[@]}"; do
    if [ "$set" = newest ]; then classes=("${newest_classes[@]}"); else classes=("${old_classes[@]}"); fi
    out="$tmp/classes-$set"
    mkdir -p "$out"
    find "$tmp/src/$set" -name '*.java' >"$tmp/sources-$set"
    if ! javac --release 11 -nowarn -cp "$tmp/mote.jar:$cp_deps" -d "$out" @"$tmp/sources-$set" \
        >"$tmp/javac-$set.log" 2>&1; then
        cat "$tmp/javac-$set.log" >&2
        log "$set: tvm4j's tests do not compile against org.mote.tvm4j"
        total_f=$((total_f + 1))
        parts+=("$set: does not compile")
        continue
    fi
    fq=()
    for c in "${classes[@]}"; do fq+=("org.mote.tvm4j.$c"); done
    log "$set: running ${classes[*]}"
    status=0
    java -Dmote.library="$tmp/libmote_java.so" -Dtest.tempdir="$libs" \
        -cp "$out:$tmp/runner:$tmp/mote.jar:$cp_deps" PeerRunner "${fq[@]}" >"$tmp/run-$set.log" 2>"$tmp/run-$set.err" \
        || status=$?
    grep -E '^(PASS|FAIL|SKIP) ' "$tmp/run-$set.log" | sed "s/^/peer\/java: $set: /" >&2 || true
    counts=$(grep -E '^counts: ' "$tmp/run-$set.log" | tail -n 1 || true)
    if [ "$status" -ne 0 ] || [ -z "$counts" ]; then
        cat "$tmp/run-$set.log" "$tmp/run-$set.err" >&2
        log "$set: the JVM failed (exit $status)"
        total_f=$((total_f + 1))
        parts+=("$set: JVM failed, exit $status")
        continue
    fi
    if grep -q '^FAIL ' "$tmp/run-$set.log"; then
        cat "$tmp/run-$set.log" "$tmp/run-$set.err" >&2
    fi
    read -r _ p f s <<<"$counts"
    total_p=$((total_p + p)) total_f=$((total_f + f)) total_s=$((total_s + s))
    parts+=("$set: $p passed, $f failed, $s skipped")
done
[ -n "$old_note" ] && parts+=("$old_note")

# --- 6. RPCTest's flows ----------------------------------------------------------------------
# RPCTest is @Ignore'd upstream; here each set's copy runs a second time with its @Ignore
# annotations removed (nothing else changes, checked like the rename), against Mote's Java RPC
# client and server, with TVM's own proxy (python -m tvm.exec.rpc_proxy) for
# test_connect_proxy_server. Reported apart: these are not the tests as Apache runs them.
proxy_port=$("$python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$python" -m tvm.exec.rpc_proxy --host 127.0.0.1 --port "$proxy_port" --port-end $((proxy_port + 1)) \
    --web-port 0 >"$tmp/proxy.log" 2>&1 &
proxy_pid=$!
trap 'kill "$proxy_pid" 2>/dev/null || true; rm -rf "$tmp"' EXIT
for _ in $(seq 200); do
    (exec 3<>"/dev/tcp/127.0.0.1/$proxy_port") 2>/dev/null && break
    kill -0 "$proxy_pid" 2>/dev/null || { cat "$tmp/proxy.log" >&2; die "TVM's rpc_proxy exited"; }
    sleep 0.1
done
rpc_p=0 rpc_f=0
rpc_parts=()
for set in "${sets[@]}"; do
    orig="$tmp/src/$set/org/mote/tvm4j/rpc/RPCTest.java"
    mkdir -p "$tmp/rpc-src/$set" "$tmp/rpc-classes/$set"
    python3 - "$orig" "$tmp/rpc-src/$set/RPCTest.java" <<'PY' || die "$set: cannot remove RPCTest's @Ignore lines"
import re, sys
text = open(sys.argv[1]).read()
# An @Ignore annotation, its message possibly split over several lines ("..." + "...").
out, n = re.subn(r'^[ \t]*@Ignore(\((?:\s*"(?:[^"\\]|\\.)*"\s*\+?)*\))?[ \t]*\n', '', text, flags=re.M)
if n == 0 or '@Ignore' in out.replace('import org.junit.Ignore;', ''):
    sys.exit("no @Ignore removed, or one left")
open(sys.argv[2], 'w').write(out)
PY
    other=$(diff "$orig" "$tmp/rpc-src/$set/RPCTest.java" | grep -E '^[<>]' | grep -vE '^<[[:space:]]*(@Ignore|\+ ")' | grep -vE '^<[[:space:]]*"' || true)
    [ -z "$other" ] || die "$set: removing @Ignore changed other lines: $other"
    if ! javac --release 11 -nowarn -cp "$tmp/classes-$set:$tmp/mote.jar:$cp_deps" -d "$tmp/rpc-classes/$set" \
        "$tmp/rpc-src/$set/RPCTest.java" >"$tmp/javac-rpc-$set.log" 2>&1; then
        cat "$tmp/javac-rpc-$set.log" >&2
        rpc_f=$((rpc_f + 1)); rpc_parts+=("$set: does not compile"); continue
    fi
    status=0
    java -Dmote.library="$tmp/libmote_java.so" -Dtest.rpc.proxy.host=127.0.0.1 -Dtest.rpc.proxy.port="$proxy_port" \
        -cp "$tmp/rpc-classes/$set:$tmp/classes-$set:$tmp/runner:$tmp/mote.jar:$cp_deps" PeerRunner \
        org.mote.tvm4j.rpc.RPCTest >"$tmp/rpc-run-$set.log" 2>"$tmp/rpc-run-$set.err" || status=$?
    grep -E '^(PASS|FAIL|SKIP) ' "$tmp/rpc-run-$set.log" | sed "s/^/peer\/java: $set, @Ignore removed: /" >&2 || true
    counts=$(grep -E '^counts: ' "$tmp/rpc-run-$set.log" | tail -n 1 || true)
    if [ "$status" -ne 0 ] || [ -z "$counts" ]; then
        cat "$tmp/rpc-run-$set.log" "$tmp/rpc-run-$set.err" >&2
        rpc_f=$((rpc_f + 1)); rpc_parts+=("$set: JVM failed, exit $status"); continue
    fi
    read -r _ p f sk <<<"$counts"
    [ "$sk" = 0 ] || { f=$((f + sk)); log "$set: RPCTest still skipped $sk tests with @Ignore removed"; }
    grep -q '^FAIL ' "$tmp/rpc-run-$set.log" && cat "$tmp/rpc-run-$set.log" "$tmp/rpc-run-$set.err" >&2
    rpc_p=$((rpc_p + p)) rpc_f=$((rpc_f + f))
    rpc_parts+=("$set: $p passed, $f failed")
done
rpc_detail=$(printf '%s / ' "${rpc_parts[@]}"); rpc_detail=${rpc_detail% / }
parts+=("RPCTest with @Ignore removed: $rpc_p passed, $rpc_f failed ($rpc_detail)")

detail=$(IFS=';'; echo "${parts[*]}" | sed 's/;/; /g')
echo "peer java: $total_p passed, $((total_f + rpc_f)) failed, $total_s skipped ($detail)"
[ "$total_f" -eq 0 ] && [ "$rpc_f" -eq 0 ]
