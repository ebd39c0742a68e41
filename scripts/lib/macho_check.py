#!/usr/bin/env python3
"""Check the static libraries of an XCFramework without Apple's tools.

    macho_check.py LIB.a --platform ios|ios-simulator|macos --minos X.Y [--require SYM ...]
                   [--require-prefix PREFIX ...] [--require-undefined SYM ...]
                   [--exports-exactly SYMBOLS.txt [--exact-prefix PREFIX ...]]

Reads the `ar` archive (BSD or GNU member names), and for every Mach-O member checks that it is a
64-bit arm64 object whose LC_BUILD_VERSION load command names the platform and the minimum OS
version asked for. Then checks that every --require symbol is defined and exported (external,
in a section) by some member, that at least one exported symbol starts with each
--require-prefix, and that each --require-undefined symbol is referenced (undefined external)
by some member: that is how a framework the library calls into shows (BNNS in Accelerate).
With --exports-exactly, the exported symbols starting with an --exact-prefix (default: mote_,
TVMFFI, TVMBackend, as scripts/test-ffi.sh lists libmote.so's) must be exactly the file's
names, one a line (ffi/abi/symbols.txt): a C ABI function missing from the library, or one the
baseline does not list, fails, and each is named.

The layouts are Apple's public <mach-o/loader.h> and <mach-o/nlist.h>, written down in
docs/apple.md. Prints one line per check and "macho checks: N passed, M failed"; exit 1 on a
failure. Standard library only.
"""

from __future__ import annotations

import argparse
import struct
import sys

MH_MAGIC_64 = 0xFEEDFACF
CPU_TYPE_ARM64 = 0x0100000C
MH_OBJECT = 1
LC_SYMTAB = 0x2
LC_BUILD_VERSION = 0x32
N_EXT = 0x01
N_TYPE = 0x0E
N_UNDF = 0x0
N_SECT = 0xE
N_STAB = 0xE0
PLATFORMS = {"macos": 1, "ios": 2, "ios-simulator": 7}


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
    """(cputype, filetype, [(platform, minos)], defined_ext, undefined_ext) of a Mach-O object."""
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
                name = name[1:] if name.startswith("_") else name  # C names carry a leading underscore
                if ntype & N_TYPE == N_SECT and nsect != 0:
                    defined.add(name)
                elif ntype & N_TYPE == N_UNDF:
                    undefined.add(name)
        pos += cmdsize
    return cputype, filetype, builds, defined, undefined


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("lib")
    ap.add_argument("--platform", required=True, choices=sorted(PLATFORMS))
    ap.add_argument("--minos", required=True)
    ap.add_argument("--require", action="append", default=[])
    ap.add_argument("--require-prefix", action="append", default=[])
    ap.add_argument("--require-undefined", action="append", default=[])
    ap.add_argument("--exports-exactly")
    ap.add_argument("--exact-prefix", action="append", default=[])
    args = ap.parse_args()
    want_platform = PLATFORMS[args.platform]
    major, minor = (int(x) for x in args.minos.split("."))
    want_minos = (major << 16) | (minor << 8)

    passed = failed = 0

    def check(ok: bool, what: str):
        nonlocal passed, failed
        print(("ok   " if ok else "FAIL ") + what)
        passed += ok
        failed += not ok

    with open(args.lib, "rb") as f:
        data = f.read()
    objects, bad, defined, undefined = 0, [], set(), set()
    for name, body in ar_members(data):
        if len(body) < 32 or struct.unpack_from("<I", body, 0)[0] != MH_MAGIC_64:
            bad.append(f"{name}: not a 64-bit Mach-O object")
            continue
        try:
            cputype, filetype, builds, d, u = read_macho(body)
        except (ValueError, struct.error) as e:
            bad.append(f"{name}: {e}")
            continue
        objects += 1
        defined |= d
        undefined |= u
        if cputype != CPU_TYPE_ARM64 or filetype != MH_OBJECT:
            bad.append(f"{name}: cputype {cputype:#x} filetype {filetype} (want arm64 object)")
        if builds != [(want_platform, want_minos)]:
            got = ", ".join(f"platform {p} minos {version(m)}" for p, m in builds) or "none"
            bad.append(f"{name}: LC_BUILD_VERSION {got}")
    check(objects > 0, f"{args.lib}: {objects} Mach-O objects")
    check(not bad, f"every object is arm64 with LC_BUILD_VERSION platform {args.platform} "
          f"({want_platform}) minos {args.minos}" + ("" if not bad else ": " + "; ".join(bad[:5])))
    for sym in args.require:
        check(sym in defined, f"exports {sym}")
    for prefix in args.require_prefix:
        n = sum(1 for s in defined if s.startswith(prefix))
        check(n > 0, f"exports {n} symbols starting with {prefix}")
    for sym in args.require_undefined:
        check(sym in undefined, f"references {sym}")
    if args.exports_exactly:
        prefixes = tuple(args.exact_prefix or ["mote_", "TVMFFI", "TVMBackend"])
        with open(args.exports_exactly) as f:
            want = {line.strip() for line in f if line.strip()}
        got = {s for s in defined if s.startswith(prefixes)}
        missing, extra = sorted(want - got), sorted(got - want)
        check(
            bool(want) and not missing and not extra,
            f"exports exactly the {len(want)} symbols of {args.exports_exactly} "
            f"(prefixes {', '.join(prefixes)}; {len(got)} exported)"
            + (f"; missing: {' '.join(missing)}" if missing else "")
            + (f"; not in the list: {' '.join(extra)}" if extra else ""),
        )
    print(f"macho checks: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
