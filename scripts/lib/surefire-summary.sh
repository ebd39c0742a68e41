# shellcheck shell=bash
# surefire_summary LABEL REPORTS_DIR MVN_STATUS PYTHON
#
# Count the tests surefire ran from its XML reports and print "LABEL checks: N passed, M
# failed" (what scripts/test.sh's check_suite reads). Failures, errors and skipped tests all
# count as failed; no test run at all, or a failed Maven run with no failed test, is one
# failure: a suite that ran nothing never passes. Returns non-zero when anything failed.
surefire_summary() {
    local label=$1 reports=$2 status=$3 python=$4 tests=0 failures=0
    if compgen -G "$reports/TEST-*.xml" >/dev/null; then
        read -r tests failures < <("$python" - "$reports" <<'PY'
import glob, sys, xml.etree.ElementTree as ET
t = f = 0
for p in glob.glob(sys.argv[1] + "/TEST-*.xml"):
    r = ET.parse(p).getroot()
    t += int(r.get("tests", 0))
    f += int(r.get("failures", 0)) + int(r.get("errors", 0)) + int(r.get("skipped", 0))
print(t, f)
PY
)
    fi
    if [ "$tests" -eq 0 ]; then
        echo "$label: surefire ran no tests" >&2
        failures=$((failures + 1))
    fi
    if [ "$status" -ne 0 ] && [ "$failures" -eq 0 ]; then
        failures=1
    fi
    echo "$label checks: $((tests - failures < 0 ? 0 : tests - failures)) passed, $failures failed"
    [ "$failures" -eq 0 ]
}
