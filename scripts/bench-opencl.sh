#!/usr/bin/env bash
# OpenCL benchmark (not a test; docs/benchmarks.md "OpenCL"): Mote's time per call of every
# case of the OpenCL zoo against a plain C host program enqueueing the same kernels with the
# same work sizes and arguments on the same device (scripts/bench/opencl-replay.c, replaying
# the launches `mote bench --opencl-trace` wrote); host<->device copy times against
# clEnqueueWriteBuffer/clEnqueueReadBuffer; and mapping device memory into host memory (the
# zero-copy path) against clEnqueueMapBuffer/clEnqueueUnmapMemObject. Mote's calls keep their
# tensors on the device (`mote bench --device-resident`), as the C program does; both are
# medians of RUNS calls, in
# ROUNDS interleaved rounds, each program's time its fastest round's median (the host's noise
# slows whole rounds of either program: docs/benchmarks.md, "Repeats"). Prints the CPU's ISA and the
# OpenCL device, then two tables.
#
#   scripts/bench-opencl.sh [--runs N] [--rounds N] [--device N] [--pocl-driver basic|pthread]
#                           [--mote PATH]
#
# --mote times another build of the CLI (an earlier commit's, for a before/after table) instead
# of the release build this script makes.
#
# --pocl-driver picks POCL's driver for both programs (POCL_DEVICES): `pthread`, its default,
# runs kernels on worker threads that sleep when idle, so every blocking call pays their
# wake-up (tens of microseconds, varying); `basic` runs them on the calling thread, which
# leaves only the host programs' own costs to differ (docs/benchmarks.md "OpenCL").
#
# Needs POCL or another OpenCL driver (scripts/opencl.sh) and the OpenCL headers and library
# link (Debian's opencl-c-headers and ocl-icd-opencl-dev, installed when missing and root).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
runs=300
rounds=5
device=0
mote_bin=""
while [ $# -gt 0 ]; do
    case "$1" in
        --runs) runs="$2"; shift 2 ;;
        --rounds) rounds="$2"; shift 2 ;;
        --device) device="$2"; shift 2 ;;
        --mote) mote_bin="$(realpath "$2")"; shift 2 ;;
        --pocl-driver)
            case "$2" in basic|pthread) export POCL_DEVICES="$2" ;; *) echo "bench-opencl.sh: --pocl-driver basic|pthread" >&2; exit 2 ;; esac
            shift 2 ;;
        -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
        *) echo "bench-opencl.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done
scripts/opencl.sh >/dev/null
missing=()
for p in opencl-c-headers ocl-icd-opencl-dev; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    [ "$(id -u)" = 0 ] || { echo "bench-opencl.sh: missing Debian packages: ${missing[*]}" >&2; exit 1; }
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}" >&2
fi
zoo="$(scripts/opencl-zoo.sh | tail -n 1)"
venv="$(scripts/venv.sh | tail -n 1)"
if [ -z "$mote_bin" ]; then
    cargo build --release --locked -q -p mote-cli
    mote_bin="$root/target/release/mote"
fi
cargo build --release --locked -q -p mote --example opencl_copies
mkdir -p target
cc -O2 -Wall -Wextra -o target/opencl-replay scripts/bench/opencl-replay.c -lOpenCL
exec "$venv/bin/python" - "$zoo" "$runs" "$rounds" "$device" "$mote_bin" <<'PY'
import json, os, platform, statistics, subprocess, sys, tempfile
zoo, runs, rounds, device, mote = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
replay = "target/opencl-replay"
flags = open("/proc/cpuinfo").read().split("flags")[1].split("\n")[0].split()
isa = [f for f in ("avx512f", "avx512_vnni", "avx2", "fma", "asimd") if f in flags]
name = [l for l in subprocess.run(["clinfo", "-l"], capture_output=True, text=True).stdout.splitlines() if "Device #" in l]
print(f"CPU: {platform.processor() or platform.machine()}, ISA {' '.join(isa)}; OpenCL device {device}: "
      f"{name[int(device)].split(':', 1)[1].strip() if len(name) > int(device) else '?'}")
print(f"medians of {runs} calls, the fastest of {rounds} interleaved rounds\n")
print("| case | launches | Mote us/call | C us/call | Mote/C | added us per launch |")
print("|---|---|---|---|---|---|")
tmp = tempfile.mkdtemp()
for m in json.load(open(os.path.join(zoo, "manifest.json")))["models"]:
    for c in m["cases"]:
        if not c.get("expected"):
            continue
        label = f"{m['name']}.{c['case']}"
        trace = os.path.join(tmp, label + ".trace")
        base = [mote, "bench", os.path.join(zoo, m["file"]), "--function", c["function"],
                "--inputs", os.path.join(zoo, c["inputs"]), "--opencl-device", device,
                "--device-resident", "--threads", "1", "--json"]
        p = subprocess.run(base + ["--runs", "1", "--opencl-trace", trace], capture_output=True, text=True)
        if p.returncode != 0:
            print(f"| {label} | skipped: {p.stderr.strip().splitlines()[-1][:80]} | | | | |")
            continue
        a, b, launches = [], [], 0
        for _ in range(rounds):
            out = subprocess.run(base + ["--runs", str(runs)], capture_output=True, text=True, check=True).stdout
            a.append(json.loads(out)["median_ms"] * 1e3)
            r = json.loads(subprocess.run([replay, trace, device, str(runs)], capture_output=True, text=True,
                                          check=True).stdout)
            b.append(r["median_us"])
            launches = r["launches"]
        ma, mb = min(a), min(b)
        print(f"| {label} | {launches} | {ma:.1f} | {mb:.1f} | {ma / mb:.2f} | {(ma - mb) / launches:.1f} |", flush=True)
print("\n| bytes | Mote write us | C write us | Mote read us | C read us | Mote map+unmap us | C map+unmap us | in place |")
print("|---|---|---|---|---|---|---|---|")
any_trace = next(os.path.join(tmp, f) for f in os.listdir(tmp))
rows, in_place = {}, {}
for _ in range(rounds):
    out = subprocess.run(["cargo", "run", "--release", "--locked", "-q", "-p", "mote", "--example", "opencl_copies",
                          "--", device, str(runs)], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        j = json.loads(line)
        c = json.loads(subprocess.run([replay, any_trace, device, "20", str(j["copy_bytes"])], capture_output=True,
                                      text=True, check=True).stdout)
        rows.setdefault(j["copy_bytes"], []).append(
            (j["write_us"], c["write_us"], j["read_us"], c["read_us"], j["map_us"], c["map_us"]))
        in_place[j["copy_bytes"]] = j["in_place"]
for n, v in rows.items():
    med = [min(x[i] for x in v) for i in range(6)]
    print(f"| {n} | " + " | ".join(f"{x:.1f}" for x in med) + f" | {'yes' if in_place[n] else 'no'} |")
PY
