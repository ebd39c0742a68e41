"""Run every crafted file of a python/crafted.py manifest through the CLI or the C ABI driver
and check the outcome, the wall time and the peak resident memory of each run.

    python3 tests/crafted/check.py cli MOTE_BINARY DIR
    python3 tests/crafted/check.py c   CRAFTED_LOAD_BINARY DIR

Each child's peak RSS comes from os.wait4 (the kernel's accounting for that one child, in
KiB on Linux). Prints `crafted check: <mode> <file> ok|FAILED (...)` per file and exits 1 if any
failed or if no file was checked. Used by scripts/test-crafted.sh.
"""

import json
import os
import subprocess
import sys
import tempfile
import threading
import time


def run(argv, timeout, env=None):
    """(exit status or -signal, output, seconds, peak RSS MiB, timed out)."""
    with tempfile.TemporaryFile() as out:
        start = time.monotonic()
        p = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env)
        timed_out = []
        timer = threading.Timer(timeout, lambda: (timed_out.append(1), p.kill()))
        timer.start()
        _, status, usage = os.wait4(p.pid, 0)
        timer.cancel()
        p.returncode = os.waitstatus_to_exitcode(status)
        elapsed = time.monotonic() - start
        out.seek(0)
        text = out.read().decode(errors="replace")
    return p.returncode, text, elapsed, usage.ru_maxrss / 1024.0, bool(timed_out)


def main():
    mode, binary, folder = sys.argv[1:4]
    manifest = json.load(open(os.path.join(folder, "manifest.json")))
    passed = failed = 0
    for e in manifest["files"]:
        if mode == "c" and not e["c_abi"]:
            continue
        path = os.path.join(folder, e["file"])
        if mode == "cli":
            argv = [binary, "run", "--code-free", path] + e["args"]
        else:
            argv = [binary, path]
        # The time bound is the manifest's; the child is killed at 3x that (a hang).
        rc, text, secs, rss, hung = run(argv, 3 * e["time_s"] + 5)
        problems = []
        if hung:
            problems.append("killed after %.0f s (hang)" % secs)
        if secs > e["time_s"]:
            problems.append("took %.2f s, bound %d s" % (secs, e["time_s"]))
        if rss > e["rss_mib"]:
            problems.append("peak RSS %.0f MiB, bound %d MiB" % (rss, e["rss_mib"]))
        if mode == "cli":
            # Exit status: 0 ok, 3 a budget (ResourceExhausted), 1 any other error (mote --help).
            want_rc = 0 if e["expect"] == "ok" else (3 if e.get("code") == "ResourceExhausted" else 1)
            if rc != want_rc:
                problems.append("exit status %d, expected %d" % (rc, want_rc))
            if e["expect"] == "error" and "error: " not in text:
                problems.append("no `error:` line")
            if e.get("budget") and e["budget"] not in text:
                problems.append("the message does not name %s" % e["budget"])
        else:
            want = 0 if e["expect"] == "ok" else e["code_num"]
            line = next((x for x in text.splitlines() if x.startswith("code ")), "")
            if rc != 0:
                problems.append("driver exit status %d" % rc)
            elif not line.startswith("code %d:" % want):
                problems.append("got %r, expected code %d (%s)" % (line[:200], want, e.get("code", "ok")))
        if e.get("message") and e["message"] not in text:
            problems.append("the output lacks %r" % e["message"])
        if len(text) > 4096:
            problems.append("output of %d bytes (messages must stay short)" % len(text))
        first = (text.strip().splitlines() or [""])[0][:160]
        detail = "%.2f s, %.0f MiB, rc %d: %s" % (secs, rss, rc, first)
        if problems:
            failed += 1
            print("crafted check: %s %s FAILED (%s; %s)" % (mode, e["file"], "; ".join(problems), detail))
        else:
            passed += 1
            print("crafted check: %s %s ok (%s)" % (mode, e["file"], detail))
    print("%s: %d passed, %d failed" % (mode, passed, failed))
    sys.exit(1 if failed or not passed else 0)


if __name__ == "__main__":
    main()
