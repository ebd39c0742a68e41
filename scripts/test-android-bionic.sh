#!/usr/bin/env bash
# Would a phone load TVM models with Mote's Android library? Applies bionic's rules
# (scripts/bionic-resolve.py; docs/android.md) to the real files, since nothing here can run
# Android code:
#
#   scripts/test-android-bionic.sh
#
# 1. The inference JNI library of each ABI (arm64-v8a, x86_64: target/android/ABI/libmote_java.so,
#    what org.mote:mote-android ships; built by scripts/build-android-so.sh when missing) with
#    every zoo model exported for
#    Android the way a developer exports it (python/android_zoo.py: TVM compiles for
#    aarch64-linux-android / x86_64-linux-android, export_library links with
#    mote_tvm.android.create_shared; cached in $MOTE_CACHE/android-zoo-<hash>/ABI): the library
#    is loaded by System.loadLibrary, each model dlopen'ed after it; every undefined strong
#    symbol must resolve, nothing above minSdk 24 on that ABI, and each TVM symbol to
#    libmote_java.so.
# 2. The system-library app library (libzoo_syslib.so: five models' system-library objects,
#    linked as an app links them) loaded after libmote_java.so: its constructors'
#    TVMFFIEnvModRegisterSystemLibSymbol and the kernels' TVMBackend* resolve to Mote's.
# 3. The RPC app's APK (target/android-app/mote-rpc.apk, built by scripts/build-apk.sh when
#    missing): its lib/ABI/ libraries (the variant with the RPC server, what
#    org.mote:mote-android-rpc ships) with the models, as the app would load uploads.
# 4. Shown to fail, each must FAIL naming the symbol: the library of main at 16047ad
#    (reproduced by clearing DF_1_GLOBAL and binding the six TVM exports LOCAL:
#    scripts/lib/elf_mutate.py), DF_1_GLOBAL alone cleared, a model linked without its
#    DT_NEEDED libc/libm (what `ld -shared` alone gives), and a library importing
#    _Unwind_RaiseException (libc.so has it only from API 30); and by relocation format (rule 6
#    of bionic-resolve.py): a library whose relative relocations are RELR with Android's tags
#    (API 28) fails, the same linked with Android's packed format (API 23; what
#    build-android-so.sh uses) passes.
# Prints "android bionic checks: N passed, M failed"; exits non-zero if any failed.
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
ROOT=$(cd "$HERE/.." && pwd -P)
cd "$ROOT"
export MOTE_CACHE="${MOTE_CACHE:-$HOME/.cache/mote}"

MIN_SDK=24
TVM_SYMS="TVMFFIErrorSetRaisedFromCStrParts TVMFFIEnvModRegisterSystemLibSymbol TVMBackendAllocWorkspace TVMBackendFreeWorkspace TVMBackendParallelLaunch TVMBackendParallelBarrier"
# shellcheck source=lib/checks.sh
. "$HERE/lib/checks.sh"
finish() {
  checks_summary "android bionic"
  exit
}
log() { echo "test-android-bionic: $*" >&2; }

command -v ld.lld >/dev/null || { [ "$(id -u)" = 0 ] && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends lld >&2; }
if ! command -v ld.lld >/dev/null; then
  check "ld.lld installed (Debian package lld; links the Android models)" 1
  finish
fi
python="${MOTE_PYTHON:-}"
[ -n "$python" ] || python="$("$HERE/venv.sh" | tail -n 1)/bin/python"
resolve() { python3 "$HERE/bionic-resolve.py" --min-sdk "$MIN_SDK" "$@"; }
expects=()
for s in $TVM_SYMS; do expects+=(--expect "$s=libmote_java.so"); done

OUT="$ROOT/target/android-bionic"
rm -rf "$OUT"; mkdir -p "$OUT"
key=$(cat python/zoo.py python/zoo_common.py python/android_zoo.py python/mote_tvm/android.py python/requirements.txt | sha256sum | cut -c1-12)
ZOO="$MOTE_CACHE/android-zoo-$key"

for abi in arm64-v8a x86_64; do
  lib="$ROOT/target/android/$abi/libmote_java.so"
  if [ ! -f "$lib" ]; then
    log "no $lib: building it"
    "$HERE/build-android-so.sh" "$abi" >&2 || true
  fi
  if [ ! -f "$lib" ]; then check "$abi: JNI library built" 1; continue; fi
  if [ ! -f "$ZOO/$abi/manifest.json" ]; then
    log "exporting the zoo for $abi into $ZOO/$abi"
    rm -rf "$ZOO/$abi.tmp"
    if "$python" python/android_zoo.py --abi "$abi" --out "$ZOO/$abi.tmp" >&2; then
      mv "$ZOO/$abi.tmp" "$ZOO/$abi"
    fi
  fi
  if [ ! -f "$ZOO/$abi/manifest.json" ]; then check "$abi: zoo exported for Android" 1; continue; fi
  models=()
  while read -r f; do models+=("$ZOO/$abi/$f"); done < <(python3 -c 'import json,sys; [print(m["file"]) for m in json.load(open(sys.argv[1]))["models"]]' "$ZOO/$abi/manifest.json")
  check "$abi: zoo exported for Android" "$( [ ${#models[@]} -gt 0 ]; echo $?)" "${#models[@]} models"

  # 1. The AAR's library, each model dlopen'ed after it.
  res=$(resolve --abi "$abi" --app "$lib" $(printf -- '--dlopen %s ' "${models[@]}") "${expects[@]}" 2>&1); rc=$?
  echo "$res" | grep -E '^(FAIL|bionic resolve|  TVM)' | sort | uniq -c | sed 's/^/  /'
  check "$abi: every model's imports resolve by bionic's rules, TVM's to libmote_java.so, none above API $MIN_SDK" \
    "$rc" "$(tail -n 1 <<<"$res")"

  # 2. The system-library app library, loaded after Mote's.
  res=$(resolve --abi "$abi" --app "$lib" --app "$ZOO/$abi/libzoo_syslib.so" "${expects[@]}" 2>&1); rc=$?
  echo "$res" | grep -E '^(FAIL|  TVM)' | sed 's/^/  /'
  n=$(grep -c '^  TVM' <<<"$res")
  check "$abi: the system-library app library's TVM imports resolve to libmote_java.so" \
    "$( [ $rc = 0 ] && [ "$n" -ge 4 ]; echo $?)" "$n TVM symbols; $(tail -n 1 <<<"$res")"

  # 4. Shown to fail.
  old="$OUT/$abi-16047ad.so"
  python3 "$HERE/lib/elf_mutate.py" "$lib" "$OUT/$abi-noglobal.so" clear-global >/dev/null
  python3 "$HERE/lib/elf_mutate.py" "$OUT/$abi-noglobal.so" "$old" localize $TVM_SYMS >/dev/null
  for bad in "$old" "$OUT/$abi-noglobal.so"; do
    cp "$bad" "$OUT/libmote_java.so"
    res=$(resolve --abi "$abi" --app "$OUT/libmote_java.so" --dlopen "$ZOO/$abi/mlp.so" 2>&1); rc=$?
    check "$abi: fails with $(basename "$bad" .so) (mlp.so's TVMFFIErrorSetRaisedFromCStrParts named)" \
      "$( [ $rc = 1 ] && grep -q '^FAIL mlp.so: undefined symbol TVMFFIErrorSetRaisedFromCStrParts' <<<"$res"; echo $?)" \
      "$(grep '^FAIL' <<<"$res" | head -n 1)"
  done
done

# A model linked with no DT_NEEDED (a bare `ld -shared`): bionic would not search libc/libm for it.
bare="$OUT/transformer-bare.so"
if tar_dir=$(mktemp -d) && "$python" - "$tar_dir" <<'PY' && ld.lld -m aarch64linux -shared -o "$bare" "$tar_dir"/*.o
import sys, os
sys.path.insert(0, "python")
import tvm, zoo
from mote_tvm import android
m = next(make() for make in zoo.MODELS if make.__name__ == "model_transformer")
tvm.compile(m.mod, target=android.target("arm64-v8a")).export_library(os.path.join(sys.argv[1], "t.tar"))
import tarfile; tarfile.open(os.path.join(sys.argv[1], "t.tar")).extractall(sys.argv[1])
PY
then
  res=$(resolve --abi arm64-v8a --app "$ROOT/target/android/arm64-v8a/libmote_java.so" --dlopen "$bare" 2>&1); rc=$?
  check "fails with a model linked without DT_NEEDED libc.so/libm.so (expf named)" \
    "$( [ $rc = 1 ] && grep -q '^FAIL transformer-bare.so: undefined symbol expf' <<<"$res"; echo $?)" "$(grep '^FAIL' <<<"$res" | head -n 1)"
else
  check "a bare-linked model built" 1
fi
rm -rf "${tar_dir:-/nonexistent}"

# A library importing _Unwind_RaiseException, as main's library did (API 30).
printf '.text\n.globl f\nf:\n  b _Unwind_RaiseException\n' >"$OUT/unwind.s"
if "$HERE/in-trixie.sh" aarch64-linux-gnu-as -o "$OUT/unwind.o" "$OUT/unwind.s" \
   && "$python" -c 'import sys; sys.path.insert(0, "python"); from mote_tvm import android; android.create_shared(sys.argv[1], [sys.argv[2]])' \
        "$OUT/libunwind_user.so" "$OUT/unwind.o"; then
  res=$(resolve --abi arm64-v8a --app "$OUT/libunwind_user.so" 2>&1); rc=$?
  check "fails with an import above minSdk (_Unwind_RaiseException: API 30)" \
    "$( [ $rc = 1 ] && grep -q '_Unwind_RaiseException is in libc.so only from API 30' <<<"$res"; echo $?)" "$(grep '^FAIL' <<<"$res" | head -n 1)"
else
  check "a library importing _Unwind_RaiseException built" 1
fi

# Relocation formats: a pointer table (relative relocations) linked by ld.lld in two ways.
printf '.data\n.balign 8\ntable:\n  .quad table\n  .quad table+8\n  .quad table+16\n' >"$OUT/relocs.s"
if "$HERE/in-trixie.sh" aarch64-linux-gnu-as -o "$OUT/relocs.o" "$OUT/relocs.s" \
   && ld.lld -shared -soname librelr.so --pack-dyn-relocs=relr --use-android-relr-tags -o "$OUT/librelr.so" "$OUT/relocs.o" \
   && ld.lld -shared -soname libaps2.so --pack-dyn-relocs=android -o "$OUT/libaps2.so" "$OUT/relocs.o"; then
  res=$(resolve --abi arm64-v8a --app "$OUT/librelr.so" 2>&1); rc=$?
  check "fails with RELR relocations (DT_ANDROID_RELR: API 28)" \
    "$( [ $rc = 1 ] && grep -q 'librelr.so: relocations in DT_ANDROID_RELR, which bionic applies from API 28' <<<"$res"; echo $?)" "$(grep '^FAIL' <<<"$res" | head -n 1)"
  res=$(resolve --abi arm64-v8a --app "$OUT/libaps2.so" 2>&1); rc=$?
  check "passes with Android's packed relocations (DT_ANDROID_RELA: API 23)" "$rc" "$(tail -n 1 <<<"$res")"
else
  check "libraries with packed relocations built" 1
fi

# 3. The RPC app's APK, with the models it would be sent.
apk="$ROOT/target/android-app/mote-rpc.apk"
[ -f "$apk" ] || "$HERE/build-apk.sh" >&2 || true
if [ -f "$apk" ]; then
  for abi in arm64-v8a x86_64; do
    python3 -c 'import sys, zipfile; sys.exit(0 if any(n.startswith(f"lib/{sys.argv[2]}/") for n in zipfile.ZipFile(sys.argv[1]).namelist()) else 1)' "$apk" "$abi" || {
      check "$abi: the APK has lib/$abi/" 1; continue; }
    [ -f "$ZOO/$abi/manifest.json" ] || continue
    res=$(resolve --abi "$abi" --apk "$apk" $(for f in "$ZOO/$abi"/*.so; do [ "$(basename "$f")" = libzoo_syslib.so ] || printf -- '--dlopen %s ' "$f"; done) "${expects[@]}" 2>&1); rc=$?
    check "$abi: the APK's libraries load and resolve every model's imports" "$rc" "$(tail -n 1 <<<"$res")"
  done
else
  check "the RPC app's APK built (scripts/build-apk.sh)" 1
fi

finish
