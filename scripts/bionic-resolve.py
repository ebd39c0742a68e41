#!/usr/bin/env python3
"""Resolve Android libraries' symbols the way bionic's dynamic linker would, without a phone.

    scripts/bionic-resolve.py --abi arm64-v8a --min-sdk 24 \
        --app libmote_java.so [--app libother.so ...] [--apk app.apk] \
        [--dlopen model.so ...] [--expect SYMBOL=LIBRARY ...]

Models an app process (docs/android.md sections 2-4 say which bionic sources each rule comes
from):

1. The app's JNI libraries (`--app`, or every `lib/<abi>/*.so` of `--apk`) are loaded in that
   order by System.loadLibrary into the app's classloader namespace. Loading one links it:
   every undefined strong symbol must be found in the lookup list bionic builds for it, the
   namespace's *global group* (the loaded libraries whose own DT_FLAGS_1 has DF_1_GLOBAL; the
   executable, app_process, has nothing an app library may rely on) followed by its *local
   group* (itself and the breadth-first closure of its DT_NEEDED entries).
2. Each `--dlopen` library (a model, opened by Mote with dlopen from inside its JNI library,
   hence in the same namespace) is linked the same way after all app libraries are loaded.
3. A DT_NEEDED entry is found among the app's libraries (the APK's lib folder is on the
   namespace's search path) or is one of the system libraries an app may link (libc.so,
   libm.so, libdl.so, liblog.so: their exports come from bindings-java/android/bionic-api.tsv,
   generated from bionic's own symbol maps by scripts/bionic-api.py); anything else fails.
4. A symbol found in a system library must exist there at --min-sdk on --abi (the table gives
   the first API level per ABI); a versioned reference (name@VERSION, as the NDK's stubs
   produce) must name the version block the table gives; an unversioned one binds to whatever
   defines the name (bionic's rule for references without a version).
5. Weak undefined symbols may stay unresolved, or name a symbol newer than --min-sdk: bionic
   binds an unresolved weak reference to 0 (the code must check it, as Rust's std and the
   getrandom crate do).

6. A library's dynamic relocations must be in a format bionic reads at --min-sdk: Android's
   packed format (DT_ANDROID_REL/DT_ANDROID_RELA, what `ld.lld --pack-dyn-relocs=android`
   writes) from API 23, DT_ANDROID_RELR from API 28, standard DT_RELR from API 30. An older
   linker does not know the tag, warns "unused DT entry" and loads the library with those
   relocations never applied (docs/android.md, section 8).

Prints one line per library, then per unresolved or too-new symbol a FAIL line naming it,
and `bionic resolve: N libraries, M symbols resolved, K failed`; exits 1 on any failure.
--expect SYMBOL=LIBRARY additionally requires SYMBOL to resolve to that library (by file name)
in every library that imports it.
"""
import argparse
import os
import struct
import sys
import zipfile

SYSTEM_LIBS = ("libc.so", "libm.so", "libdl.so", "liblog.so")
ABI_MACHINE = {"arm64-v8a": 183, "x86_64": 62}
ABI_COLUMN = {"arm64-v8a": 4, "x86_64": 5, "armeabi-v7a": 6}
DT_NEEDED, DT_SONAME, DT_FLAGS_1 = 1, 14, 0x6FFFFFFB
# Relocation-table tags and the first API level whose linker applies them (rule 6).
RELOCATION_TAGS = {
    0x6000000F: ("DT_ANDROID_REL", 23),
    0x60000011: ("DT_ANDROID_RELA", 23),
    0x6FFFE000: ("DT_ANDROID_RELR", 28),
    36: ("DT_RELR", 30),
}
DF_1_GLOBAL = 0x2
SHT_DYNAMIC, SHT_DYNSYM, SHT_GNU_VERSYM, SHT_GNU_VERNEED = 6, 11, 0x6FFFFFFF, 0x6FFFFFFE
STB_GLOBAL, STB_WEAK = 1, 2
SHN_UNDEF = 0


class ElfError(Exception):
    pass


class Library:
    """The dynamic linking facts of one ELF64 little-endian shared object."""

    def __init__(self, name, data):
        self.name = name
        if data[:4] != b"\x7fELF":
            raise ElfError(f"{name}: not an ELF file")
        if data[4] != 2 or data[5] != 1:
            raise ElfError(f"{name}: not ELF64 little-endian (class {data[4]}, data {data[5]})")
        (self.type, self.machine) = struct.unpack_from("<HH", data, 16)
        shoff, = struct.unpack_from("<Q", data, 0x28)
        shentsize, shnum, _shstrndx = struct.unpack_from("<HHH", data, 0x3A)
        sections = []
        for i in range(shnum):
            off = shoff + i * shentsize
            if off + 64 > len(data):
                raise ElfError(f"{name}: section header {i} lies outside the file")
            _nm, stype, _fl, _addr, soff, size, link, info, _al, entsize = struct.unpack_from(
                "<IIQQQQIIQQ", data, off)
            sections.append((stype, soff, size, link, info, entsize))

        def body(sec):
            return data[sec[1]: sec[1] + sec[2]]

        def strtab(index):
            return body(sections[index])

        def cstr(table, off):
            end = table.find(b"\0", off)
            return table[off: end if end >= 0 else len(table)].decode("utf-8", "replace")

        self.needed, self.soname, self.flags_1 = [], None, 0
        self.tags = set()
        self.defined = {}     # name -> binding, for exported (GLOBAL/WEAK, defined) symbols
        self.undefined = []   # (name, binding, version or None)
        dynsym = next((s for s in sections if s[0] == SHT_DYNSYM), None)
        dynamic = next((s for s in sections if s[0] == SHT_DYNAMIC), None)
        if dynamic is None:
            raise ElfError(f"{name}: no dynamic section (not a shared object?)")
        dstr = strtab(dynamic[3])
        raw = body(dynamic)
        for off in range(0, len(raw) - 15, 16):
            tag, val = struct.unpack_from("<qQ", raw, off)
            if tag == 0:
                break
            self.tags.add(tag)
            if tag == DT_NEEDED:
                self.needed.append(cstr(dstr, val))
            elif tag == DT_SONAME:
                self.soname = cstr(dstr, val)
            elif tag == DT_FLAGS_1:
                self.flags_1 = val
        if dynsym is None:
            return
        symstr = strtab(dynsym[3])
        # Version requirements: index -> version name (from .gnu.version_r).
        vernames = {}
        verneed = next((s for s in sections if s[0] == SHT_GNU_VERNEED), None)
        if verneed is not None:
            vstr, vb = strtab(verneed[3]), body(verneed)
            off = 0
            for _ in range(verneed[4]):
                _ver, cnt, _file, aux, nxt = struct.unpack_from("<HHIII", vb, off)
                aoff = off + aux
                for _ in range(cnt):
                    _hash, _flags, other, vname, anext = struct.unpack_from("<IHHII", vb, aoff)
                    vernames[other] = cstr(vstr, vname)
                    aoff += anext
                off += nxt
                if nxt == 0:
                    break
        versym = next((s for s in sections if s[0] == SHT_GNU_VERSYM), None)
        vs = body(versym) if versym is not None else b""
        syms = body(dynsym)
        for i in range(1, len(syms) // 24):
            st_name, st_info, _other, shndx, _value, _size = struct.unpack_from("<IBBHQQ", syms, i * 24)
            bind = st_info >> 4
            if bind not in (STB_GLOBAL, STB_WEAK):
                continue
            sym = cstr(symstr, st_name)
            if not sym:
                continue
            if shndx == SHN_UNDEF:
                ver = None
                if 2 * i + 2 <= len(vs):
                    idx, = struct.unpack_from("<H", vs, 2 * i)
                    ver = vernames.get(idx & 0x7FFF)
                self.undefined.append((sym, bind, ver))
            else:
                self.defined[sym] = bind

    @property
    def is_global(self):
        return bool(self.flags_1 & DF_1_GLOBAL)


class SystemLib:
    def __init__(self, name, table, abi):
        self.name = name
        col = ABI_COLUMN[abi]
        self.symbols = {}  # name -> (version, first API level)
        for row in table:
            if row[0] == name and row[col] != "-":
                self.symbols[row[1]] = (row[2], int(row[col]))


def read_table(path):
    rows = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            rows.append(line.rstrip("\n").split("\t"))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--abi", required=True, choices=sorted(ABI_MACHINE))
    ap.add_argument("--min-sdk", type=int, required=True)
    ap.add_argument("--table", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                    "..", "bindings-java", "android", "bionic-api.tsv"))
    ap.add_argument("--app", action="append", default=[], help="an app JNI library, in load order")
    ap.add_argument("--apk", help="take the app libraries from this APK's lib/<abi>/")
    ap.add_argument("--dlopen", action="append", default=[], help="a library the app dlopens")
    ap.add_argument("--expect", action="append", default=[], help="SYMBOL=LIBRARY")
    ap.add_argument("--quiet", action="store_true", help="no line per resolved TVM symbol")
    args = ap.parse_args()

    table = read_table(args.table)
    system = {n: SystemLib(n, table, args.abi) for n in SYSTEM_LIBS}
    failures = []
    resolved_count = 0

    def fail(msg):
        failures.append(msg)
        print(f"FAIL {msg}")

    def load(path, data=None):
        try:
            if data is None:
                with open(path, "rb") as f:
                    data = f.read()
            lib = Library(os.path.basename(path), data)
        except (OSError, ElfError, struct.error) as e:
            fail(f"{path}: cannot read: {e}")
            return None
        if lib.machine != ABI_MACHINE[args.abi]:
            fail(f"{lib.name}: ELF machine {lib.machine}, not {args.abi}'s {ABI_MACHINE[args.abi]}")
            return None
        for tag in sorted(lib.tags & RELOCATION_TAGS.keys()):
            tag_name, api = RELOCATION_TAGS[tag]
            if api > args.min_sdk:
                fail(f"{lib.name}: relocations in {tag_name}, which bionic applies from API {api} only (min-sdk {args.min_sdk})")
        return lib

    app_libs = []
    if args.apk:
        with zipfile.ZipFile(args.apk) as z:
            for n in sorted(z.namelist()):
                if n.startswith(f"lib/{args.abi}/") and n.endswith(".so"):
                    lib = load(f"{args.apk}!/{n}", z.read(n))
                    if lib:
                        app_libs.append(lib)
        if not app_libs:
            fail(f"{args.apk}: no lib/{args.abi}/*.so")
    for p in args.app:
        lib = load(p)
        if lib:
            app_libs.append(lib)
    by_name = {lib.soname or lib.name: lib for lib in app_libs}
    by_name.update({lib.name: lib for lib in app_libs})

    expects = {}
    for e in args.expect:
        sym, _, libname = e.partition("=")
        expects[sym] = libname

    def local_group(root):
        """root and the breadth-first closure of its DT_NEEDED entries."""
        group, queue, seen = [], [root], set()
        while queue:
            lib = queue.pop(0)
            if lib.name in seen:
                continue
            seen.add(lib.name)
            group.append(lib)
            for n in getattr(lib, "needed", []):
                if n in system:
                    queue.append(system[n])
                elif n in by_name:
                    queue.append(by_name[n])
                else:
                    fail(f"{lib.name}: DT_NEEDED {n} is neither in the app nor a system library an app may link")
        return group

    def link(lib, global_group):
        nonlocal resolved_count
        lookup = list(global_group) + [x for x in local_group(lib) if x not in global_group]
        names = " ".join(x.name for x in lookup)
        print(f"link {lib.name}: lookup list {names}")
        for sym, bind, ver in lib.undefined:
            found = None
            for cand in lookup:
                if isinstance(cand, SystemLib):
                    entry = cand.symbols.get(sym)
                    if entry is None:
                        continue
                    if ver is not None and entry[0] != ver:
                        continue
                    found = cand
                    if entry[1] > args.min_sdk and bind == STB_WEAK:
                        print(f"  {sym}: weak, in {cand.name} from API {entry[1]}: resolves to 0 below that")
                    elif entry[1] > args.min_sdk:
                        fail(f"{lib.name}: {sym} is in {cand.name} only from API {entry[1]} "
                             f"on {args.abi}, above minSdk {args.min_sdk}")
                    break
                if sym in cand.defined:
                    found = cand
                    break
            if found is None:
                if bind == STB_WEAK:
                    continue
                fail(f"{lib.name}: undefined symbol {sym}{'@' + ver if ver else ''} "
                     f"resolves nowhere in its lookup list ({names})")
                continue
            resolved_count += 1
            want = expects.get(sym)
            if want is not None:
                if found.name != want:
                    fail(f"{lib.name}: {sym} resolves to {found.name}, expected {want}")
                elif not args.quiet:
                    print(f"  {sym} -> {found.name}")

    # 1. System.loadLibrary, in order. The global group grows as DF_1_GLOBAL libraries load.
    global_group = []
    for lib in app_libs:
        if lib.is_global:
            global_group.append(lib)
        link(lib, global_group)
        print(f"  {lib.name}: DF_1_GLOBAL {'set: in the global group' if lib.is_global else 'not set'}")
    # 2. dlopen from inside the app's library: same namespace, same global group.
    for p in args.dlopen:
        lib = load(p)
        if lib:
            link(lib, global_group)

    nlibs = len(app_libs) + len(args.dlopen)
    print(f"bionic resolve: {nlibs} libraries, {resolved_count} symbols resolved, {len(failures)} failed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
