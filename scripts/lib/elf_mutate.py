#!/usr/bin/env python3
"""Write a changed copy of an ELF64 little-endian shared object, to show a check can fail:

    elf_mutate.py IN OUT clear-global                 DT_FLAGS_1 without DF_1_GLOBAL
    elf_mutate.py IN OUT localize SYMBOL [SYMBOL ...] those .dynsym entries bound LOCAL

Used by scripts/test-android-bionic.sh: both together turn today's JNI library back into the
one of main at 16047ad (linked with --exclude-libs=ALL, without -z global), which bionic would
not let a model resolve TVMFFIErrorSetRaisedFromCStrParts against.
"""
import struct
import sys

DT_FLAGS_1, DF_1_GLOBAL = 0x6FFFFFFB, 0x2
SHT_DYNAMIC, SHT_DYNSYM = 6, 11


def sections(data):
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    for i in range(shnum):
        yield struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize)


def main():
    src, dst, op, *names = sys.argv[1:]
    data = bytearray(open(src, "rb").read())
    secs = list(sections(data))
    changed = 0
    if op == "clear-global":
        for _n, stype, _f, _a, off, size, *_ in secs:
            if stype != SHT_DYNAMIC:
                continue
            for pos in range(off, off + size, 16):
                tag, val = struct.unpack_from("<qQ", data, pos)
                if tag == DT_FLAGS_1 and val & DF_1_GLOBAL:
                    struct.pack_into("<qQ", data, pos, tag, val & ~DF_1_GLOBAL)
                    changed += 1
    elif op == "localize":
        dynsym = next(s for s in secs if s[1] == SHT_DYNSYM)
        strtab = secs[dynsym[6]]
        table = bytes(data[strtab[4]: strtab[4] + strtab[5]])
        for pos in range(dynsym[4] + 24, dynsym[4] + dynsym[5], 24):
            name_off, info = struct.unpack_from("<IB", data, pos)
            end = table.find(b"\0", name_off)
            if table[name_off:end].decode() in names:
                data[pos + 4] = info & 0x0F  # binding LOCAL (0), type kept
                changed += 1
    else:
        sys.exit(f"elf_mutate: unknown operation {op}")
    if changed == 0:
        sys.exit(f"elf_mutate: {op} changed nothing in {src}")
    open(dst, "wb").write(bytes(data))
    print(f"elf_mutate: {op}: {changed} change(s) -> {dst}")


if __name__ == "__main__":
    main()
