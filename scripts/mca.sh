#!/usr/bin/env bash
# Static throughput model (llvm-mca) of the cpu backend's Arm microkernels against the core's
# peak: docs/cpu-kernels.md, "Arm kernels against the core's peak (llvm-mca)". By hand only:
# CI does not run it, nothing checks its numbers, and they are models, not measurements.
#
#   scripts/mca.sh                     (as root: it uses scripts/in-trixie.sh)
#
# 1. Builds (or reuses) `mote` for aarch64-unknown-linux-gnu in release, in the trixie chroot
#    ($MOTE_CACHE/target-trixie, scripts/in-trixie.sh), and disassembles libmote.rlib with llvm-objdump-19.
# 2. For each kernel (a function name, below), finds the innermost loops of the function's
#    control-flow graph (natural loops holding no other loop) and takes the one with the most
#    FMA-class instructions (fmla/fmls/sdot/udot); a loop with branches inside is walked along
#    its longest path, i.e. the full-tile case (the sdot kernel's loads of rows that exist).
#    The loop's instructions, branch targets renamed to one label, become an assembly file.
# 3. Peers, if MOTE_MCA_XNNPACK names an XNNPACK checkout or bare git directory: the same-shape
#    published kernels (list below) are assembled (.S) or compiled with clang-19 -O2 (.c) in
#    a scratch directory, disassembled, and their loops taken the same way. Nothing of them is
#    kept outside that directory.
# 4. llvm-mca-19 -iterations=$MOTE_MCA_ITERATIONS (100) -bottleneck-analysis on every loop for
#    each -mcpu of CPUS below, plus calibration blocks (24 independent fmla / fmla by element /
#    sdot) that give each scheduling model's own FMA throughput.
#
# Output (stdout), markdown tables after the llvm-mca version line:
#  1. per -mcpu: the scheduling model behind it, the core it stands for and that core's 128-bit
#     FMA pipes (A76 2, X1 4, X3 4, M1 4), the model's own fmla and sdot rates (calibration:
#     24 independent instructions) and its fmla latency (one dependent chain);
#  2. per loop (Mote's and the peers') and -mcpu: instr/iter | FMA/iter | loads/iter |
#     cycles/iter (Total Cycles / iterations) | FLOP/cycle (the core's peak: 8 per 4-lane fmla,
#     32 int8 ops per 16-byte sdot) | util core % = (FMA/iter / cycles/iter) / the core's FMA
#     pipes | util model % = the same over the model's calibrated rate | data-dep % (llvm-mca's
#     bottleneck analysis: share of the cycles with backend pressure that register or memory
#     dependencies caused) | the busiest resources (per-unit pressure, cycles/iter);
#  3. the same per Mote kernel with its same-shape peer beside it.
# A peer's iteration covers more k than Mote's (the tile column says how many): compare
# utilisation, not cycles. The work files (loops as .s, llvm-mca reports) stay in MOTE_MCA_DIR
# (default: a new /tmp/mote-mca.XXXXXX).
#
# Environment: MOTE_MCA_XNNPACK (peers; unset: none), MOTE_MCA_DIR, MOTE_MCA_ITERATIONS,
# MOTE_MCA_NO_BUILD=1 (use the existing rlib as is).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
ROOT=$(cd "$HERE/.." && pwd -P)
TRIXIE=$HERE/in-trixie.sh
ITER=${MOTE_MCA_ITERATIONS:-100}
XNN=${MOTE_MCA_XNNPACK:-}
WORK=${MOTE_MCA_DIR:-$(mktemp -d /tmp/mote-mca.XXXXXX)}
mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd -P)
case "$WORK" in /tmp/*) ;; *) echo "mca: MOTE_MCA_DIR must lie under /tmp (seen by the chroot)" >&2; exit 2 ;; esac
log() { echo "mca: $*" >&2; }

# -mcpu, the real core it stands for, that core's 128-bit FMA pipes.
CPUS=(
  "cortex-a76 A76 2"
  "neoverse-n1 A76 2"
  "cortex-x1 X1 4"
  "neoverse-v1 X1 4"
  "cortex-x3 X3 4"
  "neoverse-v2 X3 4"
  "apple-m1 M1 4"
)

# Mote's kernels: id, tile, function-name substring (demangled).
KERNELS=(
  "packed-t4|f32-gemm 6x4 (4 k/iter)|packed::neon::t4::"
  "packed-t8|f32-gemm 6x8 (4 k/iter)|packed::neon::t8::"
  "packed-t12|f32-gemm 6x12 (4 k/iter)|packed::neon::t12::"
  "packed-t16|f32-gemm 6x16 (4 k/iter)|packed::neon::t16::"
  "dw|dw 4 px x 8 ch (1 tap/iter)|dw::interior::"
  "dw-rows|dw 3x3 s1 4 px x 8 ch (1 row/iter)|dw::neon_rows::"
  "qgemm-sdot|qs8 4x16c4 (16 k/iter)|qgemm::dotprod::tile::"
)

# XNNPACK peers: id, tile, source path, function, the Mote kernel it pairs with (or -).
PEERS=(
  "xnn-f32-6x8-a75|f32-gemm 6x8 (8 k/iter)|src/f32-gemm/gen/f32-gemm-6x8-minmax-asm-aarch64-neonfma-cortex-a75-prfm.S|xnn_f32_gemm_minmax_ukernel_6x8__asm_aarch64_neonfma_cortex_a75_prfm|packed-t8"
  "xnn-f32-6x8-ld128|f32-gemm 6x8 (4 k/iter)|src/f32-gemm/gen/f32-gemm-6x8-minmax-asm-aarch64-neonfma-ld128.S|xnn_f32_gemm_minmax_ukernel_6x8__asm_aarch64_neonfma_ld128|-"
  "xnn-f32-7x8-ld128-2|f32-gemm 7x8 (2 k/iter)|src/f32-gemm/gen/f32-gemm-7x8-minmax-asm-aarch64-neonfma-ld128-2.S|xnn_f32_gemm_minmax_ukernel_7x8__asm_aarch64_neonfma_ld128_2|-"
  "xnn-f32-6x16-lane|f32-gemm 6x16 (4 k/iter)|src/f32-gemm/gen/f32-gemm-6x16-minmax-aarch64-neonfma-lane-ld128.c|xnn_f32_gemm_minmax_ukernel_6x16__aarch64_neonfma_lane_ld128|packed-t16"
  "xnn-dw-9p8c|dw 1 px x 8 ch (9 taps/iter)|src/f32-dwconv/gen/f32-dwconv-9p8c-minmax-neonfma.c|xnn_f32_dwconv_minmax_ukernel_9p8c__neonfma|dw"
  "xnn-qs8-4x16c4|qs8 4x16c4 (16 k/iter)|src/qs8-qc8w-gemm/gen/qs8-qc8w-gemm-4x16c4-minmax-fp32-asm-aarch64-neondot-ld128.S|xnn_qs8_qc8w_gemm_minmax_fp32_ukernel_4x16c4__asm_aarch64_neondot_ld128|qgemm-sdot"
)

RLIB=${MOTE_TRIXIE_TARGET:-${MOTE_CACHE:-$HOME/.cache/mote}/target-trixie}/aarch64-unknown-linux-gnu/release/libmote.rlib
if [ "${MOTE_MCA_NO_BUILD:-0}" != 1 ]; then
  log "building mote for aarch64 (release, trixie chroot)"
  (cd "$ROOT" && "$TRIXIE" cargo build --release --locked --target aarch64-unknown-linux-gnu -p mote >&2)
fi
[ -f "$RLIB" ] || { log "no $RLIB"; exit 1; }
log "work directory: $WORK"
mkdir -p "$WORK/loops" "$WORK/mca" "$WORK/obj"
# shellcheck disable=SC2016
"$TRIXIE" sh -c 'llvm-objdump-19 -d --no-show-raw-insn -C "$1" > "$2" 2>/dev/null' sh "$RLIB" "$WORK/obj/mote.dis"

# --- peers -------------------------------------------------------------------------------------
PEER_LIST=()
if [ -n "$XNN" ]; then
  SRC=$WORK/xnnpack
  mkdir -p "$SRC" "$WORK/stub"
  # xnnpack.h includes pthreadpool.h for one type name only.
  echo 'typedef struct pthreadpool* pthreadpool_t;' > "$WORK/stub/pthreadpool.h"
  paths=()
  for p in "${PEERS[@]}"; do IFS='|' read -r _ _ path _ _ <<<"$p"; paths+=("$path"); done
  if [ -d "$XNN/src" ]; then
    (cd "$XNN" && { find src include -name '*.h' -o -name '*.inc'; printf '%s\n' "${paths[@]}"; } \
      | xargs cp --parents -t "$SRC")
  elif git --git-dir="$XNN" rev-parse --verify -q HEAD >/dev/null; then
    { git --git-dir="$XNN" ls-tree -r --name-only HEAD src include | grep -E '\.(h|inc)$'
      printf '%s\n' "${paths[@]}"; } | xargs git --git-dir="$XNN" archive HEAD | tar -x -C "$SRC"
    log "peers: XNNPACK $(git --git-dir="$XNN" rev-parse --short=12 HEAD)"
  else
    log "MOTE_MCA_XNNPACK=$XNN is neither a checkout nor a git directory"; exit 1
  fi
  for p in "${PEERS[@]}"; do
    IFS='|' read -r id _ path _ _ <<<"$p"
    if [ -f "$SRC/$path" ]; then PEER_LIST+=("$p"); else log "peer $id: $path missing, skipped"; fi
  done
  # shellcheck disable=SC2016
  "$TRIXIE" sh -c '
    cd "$1"; out=$2; stub=$3; shift 3
    for p in "$@"; do
      id=${p%%|*}; rest=${p#*|}; rest=${rest#*|}; path=${rest%%|*}
      case "$path" in
        *.c) clang-19 --target=aarch64-linux-gnu -O2 -march=armv8.2-a+dotprod -I. -Iinclude -I"$stub" -c -o "$out/$id.o" "$path" ;;
        *.S) clang-19 --target=aarch64-linux-gnu -march=armv8.2-a+dotprod -I. -Iinclude -c -o "$out/$id.o" "$path" ;;
      esac
      llvm-objdump-19 -d --no-show-raw-insn "$out/$id.o" > "$out/$id.dis"
    done' sh "$SRC" "$WORK/obj" "$WORK/stub" "${PEER_LIST[@]}"
else
  log "MOTE_MCA_XNNPACK unset: no peers"
fi

# --- the analysis (host Python: the chroot has none) -------------------------------------------
cat > "$WORK/mca.py" <<'PY'
import json, os, re, sys

BR = {"b", "bl", "br", "blr", "ret", "cbz", "cbnz", "tbz", "tbnz"}
FMA = re.compile(r"^(fmla|fmls|sdot|udot|usdot|sudot)$")
LOAD = re.compile(r"^(ldr|ldur|ldp|ldnp|ld1|ld1r|ld2|ld2r|ld3|ld4|ld1w)")


def functions(path):
    funcs, cur = {}, None
    for line in open(path, errors="replace"):
        m = re.match(r"^[0-9a-f]+ <(.+)>:$", line)
        if m:
            cur = None if m.group(1) in funcs else m.group(1)
            if cur:
                funcs[cur] = []
            continue
        m = re.match(r"^\s+([0-9a-f]+):\s+(\S+)(?:\s+(.*?))?\s*$", line)
        if m and cur is not None:
            ops = re.sub(r"\s*//.*$", "", m.group(3) or "")
            funcs[cur].append((int(m.group(1), 16), m.group(2), ops))
    return funcs


def jump(mn):
    return (mn in BR or mn.startswith("b.")) and mn not in ("bl", "blr")


def target(ops):
    m = re.search(r"0x([0-9a-f]+) <", ops)
    return int(m.group(1), 16) if m else None


def flops(mn, ops):
    """FLOPs (f32) or int8 ops of one FMA-class instruction."""
    lanes = re.match(r"v\d+\.(\d+)([sdh])", ops)
    if not lanes:
        return 0
    n = int(lanes.group(1))
    return n * 8 if mn in ("sdot", "udot", "usdot", "sudot") else n * 2


def innermost_loop(insns):
    """(path of instructions, header address, path block addresses) of the innermost natural
    loop with the most FMA-class instructions along its longest path."""
    index = {a: i for i, (a, _, _) in enumerate(insns)}
    leaders = {0}
    for i, (_, mn, ops) in enumerate(insns):
        if jump(mn):
            t = target(ops)
            if t in index:
                leaders.add(index[t])
            if i + 1 < len(insns):
                leaders.add(i + 1)
    starts = sorted(leaders)
    blocks = [(s, starts[k + 1] if k + 1 < len(starts) else len(insns)) for k, s in enumerate(starts)]
    first = {s: k for k, (s, _) in enumerate(blocks)}
    succ = []
    for s, e in blocks:
        _, mn, ops = insns[e - 1]
        out = []
        if jump(mn):
            t = target(ops)
            if t in index:
                out.append(first[index[t]])
            if mn not in ("b", "br", "ret") and e < len(insns):
                out.append(first[e])
        elif e < len(insns):
            out.append(first[e])
        succ.append(out)
    pred = [[] for _ in blocks]
    for u, vs in enumerate(succ):
        for v in vs:
            pred[v].append(u)
    reach, stack = {0}, [0]
    while stack:
        for v in succ[stack.pop()]:
            if v not in reach:
                reach.add(v)
                stack.append(v)
    dom = {u: set(reach) for u in reach}
    dom[0] = {0}
    changed = True
    while changed:
        changed = False
        for u in sorted(reach - {0}):
            ps = [dom[p] for p in pred[u] if p in reach]
            new = (set.intersection(*ps) if ps else set()) | {u}
            if new != dom[u]:
                dom[u], changed = new, True
    loops = {}
    for u in reach:
        for h in succ[u]:
            if h in dom[u]:
                body, st = {h, u}, [u]
                while st:
                    x = st.pop()
                    if x != h:
                        for p in pred[x]:
                            if p in reach and p not in body:
                                body.add(p)
                                st.append(p)
                loops.setdefault(h, set()).update(body)
    inner = [h for h, b in loops.items() if not any(o != h and o in b for o in loops)]

    def weight(k):
        s, e = blocks[k]
        return (sum(1 for _, mn, _ in insns[s:e] if FMA.match(mn)), e - s)

    best = None
    for h in inner:
        body, memo = loops[h], {}

        def longest(k):  # (fma, instr), [blocks to a latch]; the body minus edges to h is a DAG
            if k not in memo:
                opts = []
                for v in succ[k]:
                    if v == h:
                        opts.append(((0, 0), []))
                    elif v in body:
                        w, p = longest(v)
                        if p is not None:
                            opts.append((w, p))
                if opts:
                    (f, c), p = max(opts, key=lambda o: o[0])
                    wf, wc = weight(k)
                    memo[k] = ((f + wf, c + wc), [k] + p)
                else:
                    memo[k] = ((-1, -1), None)
            return memo[k]

        w, p = longest(h)
        if p is not None and (best is None or w > best[0]):
            best = (w, h, p)
    if best is None:
        return None
    _, h, path = best
    seq = [x for k in path for x in insns[blocks[k][0]:blocks[k][1]]]
    return seq, insns[blocks[h][0]][0], [insns[blocks[k][0]][0] for k in path]


def extract(dis, name, out):
    funcs = functions(dis)
    hits = [f for f in funcs if name in f]
    if not hits:
        sys.exit(f"mca: no function matching {name!r} in {dis}")
    loop = innermost_loop(funcs[hits[0]])
    if loop is None:
        sys.exit(f"mca: no loop in {hits[0]}")
    seq, head, path = loop
    with open(out, "w") as o:
        o.write(f"// {hits[0]}: innermost loop at +0x{head:x}, blocks "
                + " ".join(f"+0x{a:x}" for a in path) + "\n.Lloop:\n")
        for _, mn, ops in seq:
            o.write(f"\t{mn}\t{re.sub(r'0x[0-9a-f]+ <[^>]*>', '.Lloop', ops)}\n")
    info = {"fn": hits[0], "instr": len(seq),
            "fma": sum(1 for _, mn, _ in seq if FMA.match(mn)),
            "loads": sum(1 for _, mn, _ in seq if LOAD.match(mn)),
            "flop": sum(flops(mn, ops) for _, mn, ops in seq if FMA.match(mn)),
            "int8": any(mn in ("sdot", "udot") for _, mn, _ in seq)}
    json.dump(info, open(out + ".json", "w"))


def calibrate(work):
    srcs = {"fmla": "fmla v{i}.4s, v24.4s, v25.4s", "fmlae": "fmla v{i}.4s, v24.4s, v25.s[1]",
            "sdot": "sdot v{i}.4s, v24.16b, v25.4b[1]"}
    for k, t in srcs.items():
        with open(f"{work}/loops/cal-{k}.s", "w") as o:
            o.write("".join(t.format(i=i) + "\n" for i in range(24)))
    with open(f"{work}/loops/cal-chain.s", "w") as o:  # one accumulator: the FMA latency
        o.write("fmla v0.4s, v24.4s, v25.4s\n")


MODELS = {"A57Unit": "CortexA57Model", "N1Unit": "NeoverseN1Model", "N2Unit": "NeoverseN2Model",
          "V1Unit": "NeoverseV1Model", "V2Unit": "NeoverseV2Model", "CyUnit": "CycloneModel"}


def mca(path):
    t = open(path).read()
    num = lambda k: float(re.search(rf"^{k}:\s+([\d.]+)", t, re.M).group(1))
    r = {"iters": num("Iterations"), "cycles": num("Total Cycles"), "rthru": num("Block RThroughput")}
    res = re.search(r"^Resources:\n(.*?)\n\n", t, re.M | re.S).group(1).splitlines()
    names = [re.match(r"\[[\d.]+\]\s+- (\S+)", l).group(1) for l in res]
    pres = re.search(r"^Resource pressure per iteration:\n.*\n(.*)$", t, re.M).group(1).split()
    unit = {}
    for n, p in zip(names, pres):
        v = 0.0 if p == "-" else float(p)
        unit[n] = max(unit.get(n, 0.0), v)
    r["busy"] = sorted(unit.items(), key=lambda kv: -kv[1])[:3]
    prefix = re.match(r"([A-Za-z]+?\d*Unit|CyUnit)", names[0]).group(1)
    r["model"] = MODELS.get(prefix, prefix + "*")
    dd = re.search(r"Data Dependencies:\s+\[\s*([\d.]+)%", t)
    r["datadep"] = float(dd.group(1)) if dd else 0.0
    return r


def report(work, cpus, kernels, peers):
    cpus = [c.split() for c in cpus]
    cal, model = {}, {}

    def rate(kind, c):
        r = mca(f"{work}/mca/cal-{kind}.{c}.txt")
        return 24 / (r["cycles"] / r["iters"])

    print(f"llvm-mca: {open(work + '/mca/version').read().strip()}")
    print()
    print("| -mcpu | scheduling model | stands for | FMA pipes of the core | modelled fmla/cycle "
          "(vector, by element) | modelled sdot/cycle | fmla latency (cycles) |")
    print("|---|---|---|---|---|---|---|")
    for c, core, pipes in cpus:
        f, fe, d = rate("fmla", c), rate("fmlae", c), rate("sdot", c)
        chain = mca(f"{work}/mca/cal-chain.{c}.txt")
        cal[c] = (max(f, fe), d)
        model[c] = mca(f"{work}/mca/cal-fmla.{c}.txt")["model"]
        print(f"| {c} | {model[c]} | {core} | {pipes} | {f:.2f}, {fe:.2f} | {d:.2f} | "
              f"{chain['cycles'] / chain['iters']:.0f} |")
    rows = {}
    print()
    print("| loop | tile | -mcpu | instr/iter | FMA/iter | loads/iter | cycles/iter | FLOP/cycle (peak) | "
          "util core % | util model % | data-dep % | busiest resources (cycles/iter) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for kid, tile, *_ in kernels + peers:
        info = json.load(open(f"{work}/loops/{kid}.s.json"))
        for c, core, pipes in cpus:
            r = mca(f"{work}/mca/{kid}.{c}.txt")
            cyc = r["cycles"] / r["iters"]
            fpc = info["fma"] / cyc
            per = 32 if info["int8"] else 8
            u_core = 100 * fpc / int(pipes)
            u_model = 100 * fpc / (cal[c][1] if info["int8"] else cal[c][0])
            rows[(kid, c)] = (info, cyc, u_core, u_model)
            busy = ", ".join(f"{n} {v:.1f}" for n, v in r["busy"])
            print(f"| {kid} | {tile} | {c} | {info['instr']} | {info['fma']} | {info['loads']} | {cyc:.2f} | "
                  f"{info['flop'] / cyc:.1f} ({per * int(pipes)}) | {u_core:.0f} | {u_model:.0f} | "
                  f"{r['datadep']:.0f} | {busy} |")
    print()
    print("| kernel | tile | -mcpu (model) | instr/iter | FMA/iter | cycles/iter | util core % | util model % | "
          "peer | peer cycles/iter | peer util core % | peer util model % |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for kid, tile, *_ in kernels:
        mine = [p for p in peers if p[4] == kid]
        for c, _, _ in cpus:
            info, cyc, uc, um = rows[(kid, c)]
            line = (f"| {kid} | {tile} | {c} ({model[c].replace('Model', '')}) | {info['instr']} | "
                    f"{info['fma']} | {cyc:.2f} | {uc:.0f} | {um:.0f} |")
            if mine:
                _, pc, puc, pum = rows[(mine[0][0], c)]
                line += f" {mine[0][0]} | {pc:.2f} | {puc:.0f} | {pum:.0f} |"
            else:
                line += " - | - | - | - |"
            print(line)


def main():
    cmd, work = sys.argv[1], sys.argv[2]
    spec = json.load(open(f"{work}/spec.json"))
    if cmd == "extract":
        for kid, _, name in spec["kernels"]:
            extract(f"{work}/obj/mote.dis", name, f"{work}/loops/{kid}.s")
        for kid, _, _, fn, _ in spec["peers"]:
            extract(f"{work}/obj/{kid}.dis", fn, f"{work}/loops/{kid}.s")
        calibrate(work)
    else:
        report(work, spec["cpus"], spec["kernels"], spec["peers"])


main()
PY

python3 - "$WORK/spec.json" "${#CPUS[@]}" "${#KERNELS[@]}" "${CPUS[@]}" "${KERNELS[@]}" "${PEER_LIST[@]}" <<'PY'
import json, sys
out, nc, nk = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rest = sys.argv[4:]
cpus, kernels, peers = rest[:nc], rest[nc:nc + nk], rest[nc + nk:]
split = lambda s: s.split("|")
json.dump({"cpus": cpus, "kernels": [split(k) for k in kernels], "peers": [split(p) for p in peers]},
          open(out, "w"))
PY
python3 "$WORK/mca.py" extract "$WORK"

log "llvm-mca on $(find "$WORK/loops" -name '*.s' | wc -l) loops x ${#CPUS[@]} CPUs"
cpu_names=()
for c in "${CPUS[@]}"; do cpu_names+=("${c%% *}"); done
# shellcheck disable=SC2016
"$TRIXIE" sh -c '
  work=$1 iter=$2; shift 2
  llvm-mca-19 --version | sed -n "s/^ *\(.*LLVM version.*\)/\1/p" > "$work/mca/version"
  for f in "$work"/loops/*.s; do
    id=$(basename "$f" .s)
    for c in "$@"; do
      llvm-mca-19 -mtriple=aarch64-linux-gnu -mcpu="$c" -mattr=+dotprod -iterations="$iter" \
        -bottleneck-analysis "$f" > "$work/mca/$id.$c.txt" 2>&1
    done
  done' sh "$WORK" "$ITER" "${cpu_names[@]}"

python3 "$WORK/mca.py" report "$WORK"
