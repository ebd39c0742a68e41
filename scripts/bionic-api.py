#!/usr/bin/env python3
"""Write the table of what Android's system libraries export to apps, per ABI and API level.

    scripts/bionic-api.py --source TEXT libc.map.txt libm.map.txt libdl.map.txt liblog.map.txt \
        > bindings-java/android/bionic-api.tsv

The inputs are the symbol maps bionic builds its libraries (and the NDK its stubs) from:
bionic's libc/libc.map.txt, libm/libm.map.txt, libdl/libdl.map.txt and system/core's (now
system/logging's) liblog/liblog.map.txt. docs/android.md section 5 says how they are read; in
short:

- a map is a list of version blocks (`LIBC {`, `LIBC_N { # introduced=24`, ... `} LIBC;`);
  each line inside names one symbol and may carry tags after `#`;
- `introduced=N` (or a codename: N, O, O-MR1, ...) gives the first API level, on the block
  or on the symbol; `introduced-<arch>=N` overrides it for one ABI; a block without any tag
  is read by its name's letter (LIBC_O = 26), the first block as the oldest level an ABI has
  (21 for arm64 and x86_64, 16 for arm);
- bare arch words (`arm`, `x86`, `arm64`, `x86_64`, `riscv64`) restrict a symbol to those
  ABIs; `var` marks data;
- what apps may not link is left out: blocks named *_PRIVATE, *_PLATFORM or *_DEPRECATED, and
  symbols tagged `apex`, `llndk`, `systemapi`, `platform-only` or `future`.

Output (tab-separated, one row per library and symbol, sorted): library, symbol, version
(the block name), kind (func/var), then the first API level on arm64-v8a, x86_64 and
armeabi-v7a ('-' where the ABI does not have it). Only the table is committed, with the source
revision in its header; the maps themselves are not.
"""
import argparse
import os
import re
import sys

ABIS = (("arm64-v8a", "arm64", 21), ("x86_64", "x86_64", 21), ("armeabi-v7a", "arm", 16))
ARCH_WORDS = {"arm", "arm64", "x86", "x86_64", "riscv64"}
CODENAMES = {"L": 21, "M": 23, "N": 24, "O": 26, "O-MR1": 27, "OMR1": 27, "P": 28, "Q": 29,
             "R": 30, "S": 31, "T": 33, "U": 34, "V": 35}
EXCLUDED_TAGS = {"apex", "llndk", "systemapi", "platform-only", "future"}
EXCLUDED_BLOCKS = ("_PRIVATE", "_PLATFORM", "_DEPRECATED")


def level(text):
    if text.isdigit():
        return int(text)
    if text in CODENAMES:
        return CODENAMES[text]
    raise ValueError(f"unknown API level {text!r}")


def parse_tags(comment):
    """-> (introduced, {arch: level}, arches, words) from the text after '#'."""
    intro, per_arch, arches, words = None, {}, set(), set()
    for word in comment.split():
        if word.startswith("introduced="):
            intro = level(word.split("=", 1)[1])
        elif word.startswith("introduced-"):
            arch, value = word[len("introduced-"):].split("=", 1)
            per_arch[{"x64_64": "x86_64"}.get(arch, arch)] = level(value)
        elif word in ARCH_WORDS:
            arches.add(word)
        else:
            words.add(word)
    return intro, per_arch, arches, words


def block_level_from_name(name):
    m = re.match(r"^[A-Z]+_([A-Z]+(?:_?MR1)?|\d+)$", name)
    if not m:
        return None
    tail = m.group(1).replace("_MR1", "-MR1")
    try:
        return level(tail)
    except ValueError:
        return None


def read_map(path, library):
    rows = []
    block = None
    block_tags = (None, {}, set(), set())
    first_block = True
    with open(path, encoding="utf-8") as f:
        for raw in f:
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            m = re.match(r"^([A-Za-z0-9_]+)\s*\{\s*(?:#(.*))?$", line)
            if m:
                block = m.group(1)
                block_tags = parse_tags(m.group(2) or "")
                if block_tags[0] is None and not block_tags[1] and not first_block:
                    named = block_level_from_name(block)
                    block_tags = (named, {}, block_tags[2], block_tags[3])
                first_block = False
                continue
            if line.startswith("}"):
                block = None
                continue
            if block is None or re.match(r"^(global|local):", line) or line.startswith("*"):
                continue
            m = re.match(r"^([A-Za-z0-9_.$]+)\s*;\s*(?:#(.*))?$", line)
            if not m:
                raise ValueError(f"{path}: cannot read {line!r}")
            name = m.group(1)
            intro, per_arch, arches, words = parse_tags(m.group(2) or "")
            if block.endswith(EXCLUDED_BLOCKS) or (words | block_tags[3]) & EXCLUDED_TAGS:
                continue
            arches = arches or block_tags[2]
            levels = []
            for _abi, arch, oldest in ABIS:
                if arches and arch not in arches:
                    levels.append("-")
                    continue
                lv = per_arch.get(arch, block_tags[1].get(arch))
                if lv is None:
                    lv = intro if intro is not None else block_tags[0]
                levels.append(str(max(lv or oldest, oldest)))
            kind = "var" if "var" in words else "func"
            rows.append((library, name, block, kind, *levels))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--source", required=True, help="where the maps came from (repository@commit, ...)")
    ap.add_argument("maps", nargs="+", help="lib<name>.map.txt files")
    args = ap.parse_args()
    rows = []
    for path in args.maps:
        base = os.path.basename(path)
        if not base.endswith(".map.txt"):
            sys.exit(f"bionic-api: {path}: expected a lib<name>.map.txt file")
        rows += read_map(path, base[: -len(".map.txt")] + ".so")
    seen = set()
    out = sys.stdout
    out.write("# What Android's system libraries export to apps: generated by scripts/bionic-api.py\n")
    out.write(f"# from {args.source}\n")
    out.write("# library\tsymbol\tversion\tkind\t" + "\t".join(a for a, _, _ in ABIS) + "\n")
    for row in sorted(rows):
        if (row[0], row[1]) in seen:
            continue
        seen.add((row[0], row[1]))
        out.write("\t".join(row) + "\n")


if __name__ == "__main__":
    main()
