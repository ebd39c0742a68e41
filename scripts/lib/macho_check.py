#!/usr/bin/env python3
"""Check the static libraries of an XCFramework without Apple's tools.

    macho_check.py LIB.a --platform ios|ios-simulator|macos --minos X.Y [--arch A[,B]]
                   [--require SYM ...] [--require-prefix PREFIX ...] [--require-file NAMES.txt]
                   [--require-undefined SYM ...]
                   [--exports-exactly SYMBOLS.txt [--exact-prefix PREFIX ...]]
                   [--only-exported-prefixes P1,P2,... [--renamed-prefix MoteRT]]

LIB.a is an `ar` archive (BSD or GNU member names) or a fat ("universal") file holding one such
archive per architecture, as `lipo -create` writes it. --arch lists the architectures that must
be there, no more and no fewer (default arm64; known: arm64, x86_64). Every check below is made
for each architecture's archive on its own, and its lines start with the architecture's name.

For every Mach-O member: a 64-bit object of the architecture's CPU type whose LC_BUILD_VERSION
load command names the platform and the minimum OS version asked for. Then every --require
symbol (and every name of a --require-file, one a line) is defined and exported (external, in a
section) by some member, at least one exported symbol starts with each --require-prefix, and
each --require-undefined symbol is referenced (undefined external) by some member: that is how
a framework the library calls into shows (BNNS in Accelerate). With --exports-exactly, the
exported symbols starting with an --exact-prefix (default: mote_, TVMFFI, TVMBackend, as
scripts/test-ffi.sh lists libmote.so's) must be exactly the file's names, one a line
(ffi/abi/symbols.txt): a C ABI function missing from the library, or one the baseline does not
list, fails, and each is named.

--only-exported-prefixes checks the renaming scripts/build-xcframework.sh does so that an app
can link Mote beside another Rust static library: every exported symbol must start with one of
the prefixes (the public surface) or with --renamed-prefix (the Rust runtime, renamed), and no
member may still reference (undefined) a name the archive defines only under its renamed form
(`___rust_alloc` left undefined while `_MoteRT___rust_alloc` is defined would not link).
On the archive cargo writes, before the renaming, the first of these fails (3655 exported
symbols outside the prefixes on aarch64-apple-ios, 2026-11-27).

Symbol names are written as C names (without the leading underscore Mach-O adds) on the command
line; the renamed prefix is put in front of the Mach-O name, underscore included
(`_MoteRT` + `___rust_alloc`). The layouts are Apple's public <mach-o/loader.h>, <mach-o/fat.h>
and <mach-o/nlist.h>, written down in docs/apple.md. Prints one line per check and
"macho checks: N passed, M failed"; exit 1 on a failure. Standard library only.
"""

from __future__ import annotations

import argparse
import struct
import sys

MH_MAGIC_64 = 0xFEEDFACF
FAT_MAGIC = 0xCAFEBABE
FAT_MAGIC_64 = 0xCAFEBABF
CPU_TYPES = {"arm64": 0x0100000C, "x86_64": 0x01000007}
MH_OBJECT = 1
LC_SYMTAB = 0x2
LC_BUILD_VERSION = 0x32
N_EXT = 0x01
N_TYPE = 0x0E
N_UNDF = 0x0
N_SECT = 0xE
N_STAB = 0xE0
PLATFORMS = {"macos": 1, "ios": 2, "ios-simulator": 7}


def arch_name(cputype: int) -> str:
    for name, value in CPU_TYPES.items():
        if value == cputype:
            return name
    return f"cputype {cputype:#x}"


def fat_slices(data: bytes):
    """[(cputype, bytes)] of a fat file (big-endian fat_header and fat_arch entries), or None
    when the data does not start with a fat magic."""
    if len(data) < 8:
        return None
    magic, nfat = struct.unpack_from(">2I", data, 0)
    if magic not in (FAT_MAGIC, FAT_MAGIC_64):
        return None
    out, pos = [], 8
    for _ in range(nfat):
        if magic == FAT_MAGIC:  # cputype, cpusubtype, offset, size, align
            cputype, _sub, offset, size, _align = struct.unpack_from(">5I", data, pos)
            pos += 20
        else:  # the 64-bit variant: 64-bit offset and size, then a reserved word
            cputype, _sub, offset, size, _align, _res = struct.unpack_from(">2I2Q2I", data, pos)
            pos += 32
        if offset + size > len(data):
            raise ValueError(f"fat slice {arch_name(cputype)} is out of bounds")
        out.append((cputype, data[offset : offset + size]))
    return out


def ar_members(data: bytes):
    """Yield (name, bytes) for every member of an ar archive."""
    if not data.startswith(b"!<arch>\n"):
        raise ValueError("not an ar archive")
    pos, long_names = 8, b""
    while pos + 60 <= len(data):
        hdr = data[pos : pos + 60]
        if hdr[58:60] != b"`\n":
            raise ValueError(f"bad member header at {pos}")
        name = hdr[0:16].decode("ascii", "replace").rstrip()
        size = int(hdr[48:58].decode("ascii").strip())
        body = data[pos + 60 : pos + 60 + size]
        if len(body) != size:
            raise ValueError(f"member {name!r} is truncated")
        if name.startswith("#1/"):  # BSD: the name follows the header
            n = int(name[3:])
            name, body = body[:n].rstrip(b"\0").decode("utf-8", "replace"), body[n:]
        elif name == "//":  # GNU long-name table
            long_names = body
            name = None
        elif name.startswith("/") and name[1:].isdigit():
            off = int(name[1:])
            end = long_names.find(b"/\n", off)
            name = long_names[off:end].decode("utf-8", "replace")
        elif name in ("/", "/SYM64/"):
            name = None
        else:
            name = name.rstrip("/")
        if name is not None and not name.startswith("__.SYMDEF"):
            yield name, body
        pos += 60 + size + (size & 1)


def version(v: int) -> str:
    return f"{v >> 16}.{(v >> 8) & 0xFF}.{v & 0xFF}"


def read_macho(body: bytes):
    """(cputype, filetype, [(platform, minos)], defined_ext, undefined_ext) of a Mach-O object;
    the symbol names as Mach-O spells them (C names with their leading underscore)."""
    magic, cputype, _sub, filetype, ncmds, _size, _flags, _res = struct.unpack_from("<8I", body, 0)
    if magic != MH_MAGIC_64:
        raise ValueError(f"not a 64-bit little-endian Mach-O (magic {magic:#x})")
    pos, builds, defined, undefined = 32, [], set(), set()
    for _ in range(ncmds):
        cmd, cmdsize = struct.unpack_from("<2I", body, pos)
        if cmdsize < 8 or pos + cmdsize > len(body):
            raise ValueError("load command out of bounds")
        if cmd == LC_BUILD_VERSION:
            platform, minos = struct.unpack_from("<2I", body, pos + 8)
            builds.append((platform, minos))
        elif cmd == LC_SYMTAB:
            symoff, nsyms, stroff, strsize = struct.unpack_from("<4I", body, pos + 8)
            strtab = body[stroff : stroff + strsize]
            for i in range(nsyms):
                strx, ntype, nsect, _desc, _value = struct.unpack_from("<IBBHQ", body, symoff + 16 * i)
                if ntype & N_STAB or not ntype & N_EXT:
                    continue
                end = strtab.find(b"\0", strx)
                name = strtab[strx:end].decode("utf-8", "replace")
                if ntype & N_TYPE == N_SECT and nsect != 0:
                    defined.add(name)
                elif ntype & N_TYPE == N_UNDF:
                    undefined.add(name)
        pos += cmdsize
    return cputype, filetype, builds, defined, undefined


def c_name(name: str) -> str:
    return name[1:] if name.startswith("_") else name  # C names carry a leading underscore


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("lib")
    ap.add_argument("--platform", required=True, choices=sorted(PLATFORMS))
    ap.add_argument("--minos", required=True)
    ap.add_argument("--arch", default="arm64")
    ap.add_argument("--require", action="append", default=[])
    ap.add_argument("--require-prefix", action="append", default=[])
    ap.add_argument("--require-file")
    ap.add_argument("--require-undefined", action="append", default=[])
    ap.add_argument("--exports-exactly")
    ap.add_argument("--exact-prefix", action="append", default=[])
    ap.add_argument("--only-exported-prefixes")
    ap.add_argument("--renamed-prefix", default="MoteRT")
    args = ap.parse_args()
    want_platform = PLATFORMS[args.platform]
    major, minor = (int(x) for x in args.minos.split("."))
    want_minos = (major << 16) | (minor << 8)
    want_archs = [a for a in args.arch.split(",") if a]
    for a in want_archs:
        if a not in CPU_TYPES:
            ap.error(f"unknown architecture {a} (known: {', '.join(CPU_TYPES)})")

    passed = failed = 0

    def check(ok: bool, what: str):
        nonlocal passed, failed
        print(("ok   " if ok else "FAIL ") + what)
        passed += ok
        failed += not ok

    with open(args.lib, "rb") as f:
        data = f.read()
    fat = fat_slices(data)
    if fat is None:
        # A thin archive: its architecture is its members' (the first Mach-O one's).
        cputype = None
        for _name, body in ar_members(data):
            if len(body) >= 32 and struct.unpack_from("<I", body, 0)[0] == MH_MAGIC_64:
                cputype = struct.unpack_from("<I", body, 4)[0]
                break
        archives = [(cputype, data)] if cputype is not None else []
        layout = "thin archive"
    else:
        archives = fat
        layout = f"fat file, {len(fat)} architectures"
    got_archs = [arch_name(c) for c, _ in archives]
    check(sorted(got_archs) == sorted(want_archs) and len(set(got_archs)) == len(got_archs),
          f"{args.lib}: architectures {', '.join(got_archs) or 'none'} ({layout}; "
          f"want {', '.join(want_archs)})")

    require_file = []
    if args.require_file:
        with open(args.require_file) as f:
            require_file = [line.strip() for line in f if line.strip()]

    for cputype, archive in archives:
        arch = arch_name(cputype)
        objects, bad, defined_raw, undefined_raw = 0, [], set(), set()
        for name, body in ar_members(archive):
            if len(body) < 32 or struct.unpack_from("<I", body, 0)[0] != MH_MAGIC_64:
                bad.append(f"{name}: not a 64-bit Mach-O object")
                continue
            try:
                member_cpu, filetype, builds, d, u = read_macho(body)
            except (ValueError, struct.error) as e:
                bad.append(f"{name}: {e}")
                continue
            objects += 1
            defined_raw |= d
            undefined_raw |= u
            if member_cpu != cputype or filetype != MH_OBJECT:
                bad.append(f"{name}: cputype {member_cpu:#x} filetype {filetype} "
                           f"(want {arch} {cputype:#x} object)")
            if builds != [(want_platform, want_minos)]:
                got = ", ".join(f"platform {p} minos {version(m)}" for p, m in builds) or "none"
                bad.append(f"{name}: LC_BUILD_VERSION {got}")
        defined = {c_name(s) for s in defined_raw}
        undefined = {c_name(s) for s in undefined_raw}
        check(objects > 0, f"{arch}: {objects} Mach-O objects")
        check(not bad, f"{arch}: every object is {arch} ({cputype:#x}) with LC_BUILD_VERSION "
              f"platform {args.platform} ({want_platform}) minos {args.minos}"
              + ("" if not bad else ": " + "; ".join(bad[:5])))
        for sym in args.require:
            check(sym in defined, f"{arch}: exports {sym}")
        if args.require_file:
            missing = [s for s in require_file if s not in defined]
            check(bool(require_file) and not missing,
                  f"{arch}: exports all {len(require_file)} names of {args.require_file}"
                  + (f"; missing {len(missing)}: {' '.join(missing[:5])}" if missing else ""))
        for prefix in args.require_prefix:
            n = sum(1 for s in defined if s.startswith(prefix))
            check(n > 0, f"{arch}: exports {n} symbols starting with {prefix}")
        for sym in args.require_undefined:
            check(sym in undefined, f"{arch}: references {sym}")
        if args.exports_exactly:
            prefixes = tuple(args.exact_prefix or ["mote_", "TVMFFI", "TVMBackend"])
            with open(args.exports_exactly) as f:
                want = {line.strip() for line in f if line.strip()}
            got = {s for s in defined if s.startswith(prefixes)}
            missing, extra = sorted(want - got), sorted(got - want)
            check(
                bool(want) and not missing and not extra,
                f"{arch}: exports exactly the {len(want)} symbols of {args.exports_exactly} "
                f"(prefixes {', '.join(prefixes)}; {len(got)} exported)"
                + (f"; missing: {' '.join(missing)}" if missing else "")
                + (f"; not in the list: {' '.join(extra)}" if extra else ""),
            )
        if args.only_exported_prefixes is not None:
            public = tuple(p for p in args.only_exported_prefixes.split(",") if p)
            renamed = "_" + args.renamed_prefix
            n_renamed = sum(1 for s in defined_raw if s.startswith(renamed))
            outside = sorted(s for s in defined_raw
                             if not s.startswith(renamed) and not c_name(s).startswith(public))
            check(bool(public) and not outside,
                  f"{arch}: every exported symbol is public ({', '.join(public)}: "
                  f"{len(defined_raw) - n_renamed - len(outside)}) or renamed ({renamed}: "
                  f"{n_renamed})"
                  + (f"; {len(outside)} outside, e.g. {' '.join(outside[:4])}" if outside else ""))
            dangling = sorted(s for s in undefined_raw if renamed + s in defined_raw)
            check(not dangling,
                  f"{arch}: no undefined reference to a name defined only as {renamed}+name"
                  + (f"; {len(dangling)} left, e.g. {' '.join(dangling[:4])}" if dangling else ""))
    print(f"macho checks: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
