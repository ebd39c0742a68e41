# shellcheck shell=bash
# The check counter of the Android suites (test-android.sh, test-android-bionic.sh,
# test-android-unwind.sh): source it, call `check NAME STATUS [DETAIL]` per check (STATUS 0 =
# passed), and end with `checks_summary LABEL`, which prints "LABEL checks: N passed, M failed"
# (what scripts/test.sh's check_suite reads) and returns non-zero on a failure or when no
# check passed at all.
passed=0 failed=0
check() {
  if [ "$2" = 0 ]; then
    passed=$((passed + 1)); echo "PASS $1${3:+: $3}"
  else
    failed=$((failed + 1)); echo "FAIL $1${3:+: $3}"
  fi
}
checks_summary() {
  echo "$1 checks: $passed passed, $failed failed"
  [ "$failed" = 0 ] && [ "$passed" -gt 0 ]
}
