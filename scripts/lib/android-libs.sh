# shellcheck shell=bash
# android_lib [--rpc] ABI [PATH]: print PATH when given, else the JNI library
# scripts/build-android-so.sh builds for ABI (arm64-v8a or x86_64): the inference library
# (target/android/ABI/), or with --rpc the one built with the RPC server
# (target/android/rpc/ABI/); fails, saying so, when the file is not there.
# Used by build-aar.sh and build-apk.sh. Needs HERE (the scripts folder).
android_lib() {
  local rpc=()
  if [ "$1" = --rpc ]; then rpc=(--rpc); shift; fi
  local lib=${2:-}
  [ -n "$lib" ] || lib=$("$HERE/build-android-so.sh" "${rpc[@]}" "$1" | tail -n 1)
  if [ ! -f "$lib" ]; then
    echo "no $1 JNI library${rpc:+ with the RPC server} at '$lib'" >&2
    return 1
  fi
  printf '%s\n' "$lib"
}
