#!/usr/bin/env bash
# Audit an Android JNI library (the output of scripts/build-android-so.sh):
#
#   scripts/audit-android-so.sh [--abi arm64-v8a|x86_64] [--rpc] LIB [BRIDGE.java ...]
#
# LIB is the inference library (scripts/build-android-so.sh ABI), or with --rpc the one built
# with the RPC server (scripts/build-android-so.sh --rpc ABI).
# Reads LIB with readelf (GNU binutils reads ELF files of every machine; llvm-readelf works
# too) and checks, one line each:
#   ELF64 shared object for the ABI's machine (AArch64 or X86-64; default arm64-v8a);
#   NEEDED only libc.so/libdl.so/libm.so/liblog.so (system
#   libraries every Android has; anything else would have to ship in the APK); SONAME set;
#   no text relocations (DT_TEXTREL or the TEXTREL flag: refused by Android since API 23);
#   dynamic relocations in Android's packed format only (DT_ANDROID_RELA, no plain DT_RELA, no
#   RELR: bionic reads the packed format from API 23, RELR from 28/30);
#   no RPATH/RUNPATH; every LOAD segment aligned to at least 16384 bytes (Google Play's
#   requirement for 16 KB page devices, Android 15+) with its file offset congruent to its
#   address modulo that alignment; a non-executable stack; DT_FLAGS_1 has DF_1_GLOBAL (bionic
#   then puts the library in its namespace's global group, so model libraries dlopen'ed later
#   resolve the TVM symbols against it: docs/android.md section 4); a PT_GNU_EH_FRAME header
#   (the built-in unwinder finds unwind tables through it); no `_Unwind_*` imported (libc.so
#   has them only from API 30); dynamic exports exactly JNI_OnLoad, the Java_* natives and the
#   nine TVM symbols models and system-library objects import (TVMFFIErrorSetRaisedFromCStrParts,
#   TVMFFIEnvModRegisterSystemLibSymbol, TVMBackendAllocWorkspace, TVMBackendFreeWorkspace,
#   TVMBackendParallelLaunch, TVMBackendParallelBarrier, and for exec_mode="compiled" models
#   TVMBackendAnyListSetPackedArg, TVMBackendAnyListMoveFromPackedReturn,
#   TVMBackendAnyListResetItem), nothing of Rust's or the unwinder's;
#   and every `native` method of the bridge classes (default: the Maven project's
#   org/mote/NativeBridge.java, and with --rpc org/mote/rpc/RpcBridge.java too) has its
#   Java_<package>_<Class>_<name> export, and no export lacks its declaration.
#   The RPC server: in the inference library no Java_org_mote_rpc_* export and no code of the
#   mote-rpc crate (no symbol naming mote_rpc in the symbol table, which the build keeps:
#   --strip-debug; its absence fails the check), and a copy stripped by llvm-strip (its size is
#   printed: what an app ships) has no Java_org_mote_rpc_* dynamic symbol; with --rpc all three
#   the other way round (the RpcBridge natives exported, mote_rpc code present, the exports kept
#   by the stripped copy).
# Prints "android so checks: N passed, M failed"; exits non-zero if any failed.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
ROOT=$(cd "$HERE/.." && pwd -P)

ABI=arm64-v8a
RPC=0
while [ $# -gt 0 ]; do
  case "$1" in
    --abi) ABI=${2:-}; shift 2 || true ;;
    --rpc) RPC=1; shift ;;
    *) break ;;
  esac
done
case "$ABI" in
  arm64-v8a) WANT_MACHINE=AArch64 ;;
  x86_64) WANT_MACHINE="Advanced Micro Devices X86-64" ;;
  *) echo "audit-android-so: unknown ABI '$ABI'" >&2; echo "android so checks: 0 passed, 1 failed"; exit 1 ;;
esac
# What model libraries import from the process (docs/android.md section 4).
TVM_EXPORTS="TVMBackendAllocWorkspace TVMBackendFreeWorkspace TVMBackendParallelBarrier TVMBackendParallelLaunch TVMFFIEnvModRegisterSystemLibSymbol TVMFFIErrorSetRaisedFromCStrParts TVMBackendAnyListSetPackedArg TVMBackendAnyListMoveFromPackedReturn TVMBackendAnyListResetItem"
LIB=${1:-}
JAVA_SRC=$ROOT/bindings-java/java/src/main/java
shift || true
BRIDGES=("$@")
if [ ${#BRIDGES[@]} = 0 ]; then
  BRIDGES=("$JAVA_SRC/org/mote/NativeBridge.java")
  [ "$RPC" = 0 ] || BRIDGES+=("$JAVA_SRC/org/mote/rpc/RpcBridge.java")
fi
if [ -z "$LIB" ] || [ ! -f "$LIB" ]; then
  echo "usage: $0 LIB [BRIDGE.java ...]  (no file '$LIB')" >&2
  echo "android so checks: 0 passed, 1 failed"
  exit 1
fi

RE=""
for t in readelf aarch64-linux-gnu-readelf llvm-readelf; do
  if command -v "$t" >/dev/null 2>&1; then RE=$t; break; fi
done
if [ -z "$RE" ]; then
  echo "audit-android-so: no readelf (apt-get install binutils)" >&2
  echo "android so checks: 0 passed, 1 failed"
  exit 1
fi

passed=0 failed=0
check() {  # check NAME OK(0/1) DETAIL
  if [ "$2" = 0 ]; then
    passed=$((passed + 1)); echo "PASS $1${3:+: $3}"
  else
    failed=$((failed + 1)); echo "FAIL $1${3:+: $3}"
  fi
}
ok() { if "$@"; then echo 0; else echo 1; fi; }

hdr=$("$RE" -h -W "$LIB")
dyn=$("$RE" -d -W "$LIB")
phdrs=$("$RE" -l -W "$LIB")
syms=$("$RE" --dyn-syms -W "$LIB")

class=$(awk -F: '/^ *Class:/ { gsub(/ /, "", $2); print $2 }' <<<"$hdr")
machine=$(awk -F: '/^ *Machine:/ { sub(/^ +/, "", $2); print $2 }' <<<"$hdr")
type=$(awk -F: '/^ *Type:/ { sub(/^ +/, "", $2); print $2 }' <<<"$hdr")
check "ELF64" "$(ok test "$class" = ELF64)" "$class"
check "$WANT_MACHINE ($ABI)" "$(ok test "$machine" = "$WANT_MACHINE")" "$machine"
check "shared object" "$(ok grep -q '^DYN' <<<"$type")" "$type"

needed=$(sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' <<<"$dyn" | sort | tr '\n' ' ')
bad=""
for n in $needed; do
  case "$n" in libc.so | libdl.so | libm.so | liblog.so) ;; *) bad="$bad $n" ;; esac
done
check "NEEDED only Android system libraries" "$(ok test -z "$bad")" "${bad:+not allowed:$bad; }NEEDED: ${needed:-none}"

soname=$(sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p' <<<"$dyn")
check "SONAME set" "$(ok test -n "$soname")" "${soname:-none}"

textrel=$(grep -E '\(TEXTREL\)|\(FLAGS\).*TEXTREL' <<<"$dyn" || true)
check "no text relocations" "$(ok test -z "$textrel")" "${textrel:-no DT_TEXTREL, no TEXTREL flag}"

packed=$(grep -cE '\(ANDROID_RELA\)|0x0*60000011 ' <<<"$dyn" || true)
plain=$(grep -E '\((RELA|RELR|ANDROID_RELR)\)|0x0*6fffe000 ' <<<"$dyn" || true)
check "dynamic relocations packed (DT_ANDROID_RELA only)" "$(ok test "$packed" -ge 1 -a -z "$plain")" \
  "${plain:+also: $plain; }DT_ANDROID_RELA entries: $packed"

rpath=$(grep -E '\((RPATH|RUNPATH)\)' <<<"$dyn" || true)
check "no RPATH/RUNPATH" "$(ok test -z "$rpath")" "$rpath"

# LOAD lines: Type Offset VirtAddr PhysAddr FileSiz MemSiz Flg Align (Flg may hold spaces).
aligns=$(awk '$1 == "LOAD" { print $NF }' <<<"$phdrs")
small=""
for a in $aligns; do
  [ $((a)) -ge 16384 ] || small="$small $a"
done
check "LOAD segments aligned to >= 16 KB" "$(ok test -n "$aligns" -a -z "$small")" \
  "aligns: $(tr '\n' ' ' <<<"$aligns")${small:+(too small:$small)}"

# A loader maps a segment at page granularity: offset and address must agree modulo the
# alignment, or a 16 KB page device cannot map it.
incongruent=""
while read -r off addr al; do
  [ $((al)) -gt 0 ] && [ $((off % al)) -ne $((addr % al)) ] && incongruent="$incongruent $off/$addr"
done < <(awk '$1 == "LOAD" { print $2, $3, $NF }' <<<"$phdrs")
check "LOAD offsets congruent with addresses modulo the alignment" "$(ok test -n "$aligns" -a -z "$incongruent")" \
  "${incongruent:+offset/address:$incongruent}"

stack=$(awk '$1 == "GNU_STACK"' <<<"$phdrs")
check "non-executable stack" "$(ok test -n "$stack" -a -z "$(grep -E 'RWE|E$' <<<"$stack" || true)")" \
  "$(tr -s ' ' <<<"${stack:-no GNU_STACK}")"

flags1=$(grep -E '\(FLAGS_1\)' <<<"$dyn" || true)
check "DF_1_GLOBAL set (in bionic's global group: models resolve the TVM symbols against it)" \
  "$(ok grep -qw GLOBAL <<<"$flags1")" "$(tr -s ' ' <<<"${flags1:-no DT_FLAGS_1}")"
check "PT_GNU_EH_FRAME present (the built-in unwinder reads it)" "$(ok grep -q GNU_EH_FRAME <<<"$phdrs")"
unwind_imports=$(awk '$1 ~ /^[0-9]+:$/ && $7 == "UND" && $8 ~ /^_Unwind_/ { print $8 }' <<<"$syms")
check "no _Unwind_* imported (libc.so has them only from API 30)" "$(ok test -z "$unwind_imports")" \
  "$(head -n 3 <<<"$unwind_imports" | tr '\n' ' ')"

# Defined dynamic symbols: Num: Value Size Type Bind Vis Ndx Name
exports=$(awk '$1 ~ /^[0-9]+:$/ && $7 != "UND" && ($5 == "GLOBAL" || $5 == "WEAK") && $8 != "" {
                 sub(/@.*/, "", $8); print $8 }' <<<"$syms" | sort -u)
tvm_re="^($(tr ' ' '|' <<<"$TVM_EXPORTS"))\$"
others=$(grep -v -E '^(JNI_OnLoad|Java_.+)$' <<<"$exports" | grep -v -E "$tvm_re" || true)
check "exports only JNI_OnLoad, Java_* and the TVM symbols models import" "$(ok test -z "$others")" \
  "$(wc -l <<<"$exports") exports${others:+; others: $(head -n 5 <<<"$others" | tr '\n' ' ')}"
missing_tvm=""
for t in $TVM_EXPORTS; do grep -qx "$t" <<<"$exports" || missing_tvm="$missing_tvm $t"; done
check "exports every TVM symbol models and system-library objects import" "$(ok test -z "$missing_tvm")" \
  "${missing_tvm:+missing:$missing_tvm}"
check "JNI_OnLoad exported" "$(ok grep -qx JNI_OnLoad <<<"$exports")"

declared=""
for bridge in "${BRIDGES[@]}"; do
  [ -f "$bridge" ] || { check "bridge class $bridge exists" 1 "no such file"; continue; }
  # The JNI prefix of the class: its path below the source root, '/' -> '_'.
  rel=${bridge#"$JAVA_SRC"/}
  prefix=Java_$(sed -e 's/\.java$//' -e 's|/|_|g' <<<"$rel")
  # `static native T name(` declarations (no overloads, so the short JNI names apply).
  declared+=$(grep -oE 'native +[][A-Za-z0-9_.<> ]+ +[A-Za-z0-9_]+ *\(' "$bridge" |
    sed -E "s/.* ([A-Za-z0-9_]+) *\\($/${prefix}_\1/" || true)
  declared+=$'\n'
done
declared=$(grep . <<<"$declared" | sort -u || true)
java_exports=$(grep '^Java_' <<<"$exports" || true)
missing=$(comm -23 <(echo "$declared") <(echo "$java_exports") | grep . || true)
extra=$(comm -13 <(echo "$declared") <(echo "$java_exports") | grep . || true)
check "every bridge native exported, nothing else" \
  "$(ok test -n "$declared" -a -z "$missing" -a -z "$extra")" \
  "$(grep -c . <<<"$declared") declared${missing:+; missing: $(tr '\n' ' ' <<<"$missing")}${extra:+; undeclared: $(tr '\n' ' ' <<<"$extra")}"

# The RPC server: only in the library built with mote-java's rpc feature.
rpc_exports=$(grep -c '^Java_org_mote_rpc_' <<<"$exports" || true)
# Every symbol of the symbol table (.symtab, kept by the build's --strip-debug) whose name holds
# mote_rpc: the crate's own functions and other crates' code instantiated for its types, in
# Rust's legacy and v0 manglings alike (both spell the crate name out).
symtab=$("$RE" -s -W "$LIB" | awk '/^Symbol table .*\.symtab/ { t = 1; next } /^Symbol table/ { t = 0 } t && $1 ~ /^[0-9]+:$/ && $8 != "" { print $8 }')
nsym=$(grep -c . <<<"$symtab" || true)
rpc_syms=$(grep -c 'mote_rpc' <<<"$symtab" || true)
STRIP=()
for t in llvm-strip llvm-strip-19 llvm-strip-18 llvm-strip-17 llvm-strip-16 llvm-strip-15 llvm-strip-14; do
  if command -v "$t" >/dev/null 2>&1; then STRIP=("$t"); break; fi
done
# Without one on the host: trixie's (scripts/trixie.sh installs LLVM 19), reading and writing
# below the checkout, which the chroot sees.
[ ${#STRIP[@]} -gt 0 ] || STRIP=("$HERE/in-trixie.sh" llvm-strip-19)
mkdir -p "$ROOT/target"
sdir=$(mktemp -d "$ROOT/target/audit-strip.XXXXXX")
stripped="$sdir/libmote_java.so"
if "${STRIP[@]}" -o "$stripped" "$LIB" >/dev/null 2>&1 && [ -s "$stripped" ]; then
  ssize=$(stat -c %s "$stripped")
  sexports=$("$RE" --dyn-syms -W "$stripped" |
    awk '$1 ~ /^[0-9]+:$/ && $7 != "UND" && $8 ~ /^Java_org_mote_rpc_/ { sub(/@.*/, "", $8); print $8 }' | sort -u)
  srpc=$(grep -c . <<<"$sexports" || true)
  check "stripped by ${STRIP[*]##*/}" 0 "$ssize bytes (unstripped $(stat -c %s "$LIB"))"
else
  ssize="" srpc=""
  check "stripped by ${STRIP[*]##*/}" 1 "no llvm-strip (install llvm, or set up the trixie chroot: scripts/trixie.sh)"
fi
rm -rf "$sdir"
check "symbol table present (to look for mote_rpc code in)" "$(ok test "$nsym" -gt 1000)" "$nsym symbols"
if [ "$RPC" = 0 ]; then
  check "no RPC server: no Java_org_mote_rpc_* export" "$(ok test "$rpc_exports" = 0)" "$rpc_exports"
  check "no RPC server: no mote_rpc code (symbols naming mote_rpc)" "$(ok test "$nsym" -gt 1000 -a "$rpc_syms" = 0)" \
    "$rpc_syms of $nsym symbols$( [ "$rpc_syms" = 0 ] || printf '; e.g. %s' "$(grep -m 2 'mote_rpc' <<<"$symtab" | tr '\n' ' ')")"
  check "no RPC server: the stripped copy has no Java_org_mote_rpc_* dynamic symbol" "$(ok test "$srpc" = 0)" "${srpc:-not stripped}"
else
  check "RPC server: Java_org_mote_rpc_RpcBridge_* exported" "$(ok test "$rpc_exports" -gt 0)" "$rpc_exports"
  check "RPC server: mote_rpc code present (symbols naming mote_rpc)" "$(ok test "$rpc_syms" -gt 0)" "$rpc_syms of $nsym symbols"
  check "RPC server: the stripped copy keeps the Java_org_mote_rpc_* exports" \
    "$(ok test -n "$srpc" -a "$srpc" = "$rpc_exports" -a "$rpc_exports" -gt 0)" "${srpc:-not stripped}"
fi

echo "android so checks: $passed passed, $failed failed"
[ "$failed" = 0 ]
