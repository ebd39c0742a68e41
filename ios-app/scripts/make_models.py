"""Build Relax models as TVM system libraries for iOS and archive them for the app's link.

    python make_models.py [--out ios-app/Models] [--triple arm64-apple-ios14.0] SPEC...

SPEC names a Relax IRModule and the prefix it gets in the app (docs/system-lib.md §1):
    zoo:NAME[=PREFIX]          model NAME of Mote's python/zoo.py (prefix NAME_)
    FILE.py[=PREFIX]           a Python file defining a global `mod` (an IRModule)
    FILE.json[=PREFIX]         an IRModule saved with tvm.ir.save_json
(default prefix for files: the file's stem and "_"). Every prefix must be distinct.

For each: tvm.compile(mod.with_attr("system_lib_prefix", PREFIX), target llvm -mtriple TRIPLE),
export_library to a .tar (TVM writes the objects without linking them: no Apple linker is
needed), the objects renamed PREFIX + their name, checked to be 64-bit arm64 Mach-O relocatable
objects with the platform and minimum OS the triple asks for (LC_BUILD_VERSION: platform 2
iOS, 7 iOS simulator). Then `llvm-ar --format=darwin` (LLVM_AR, default llvm-ar) writes
OUT/libmodels.a with a symbol table Apple's linker reads, and OUT/models.txt lists the prefixes.
The app links the archive with -force_load (Models.xcconfig): nothing in it is referenced by
name, so a plain link would drop it.
"""
import argparse
import os
import runpy
import shutil
import struct
import subprocess
import sys
import tarfile
import tempfile

import tvm

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))

MH_MAGIC_64 = 0xFEEDFACF
CPU_TYPE_ARM64 = 0x0100000C
MH_OBJECT = 1
LC_BUILD_VERSION = 0x32
PLATFORMS = {1: "macos", 2: "ios", 7: "ios-simulator"}


def load_module(spec):
    """(IRModule, prefix) for one SPEC."""
    source, _, prefix = spec.partition("=")
    if source.startswith("zoo:"):
        name = source[4:]
        sys.path.insert(0, os.path.join(ROOT, "python"))
        import zoo  # Mote's test model zoo

        for make in zoo.MODELS:
            m = make()
            if m.name == name:
                return m.mod, prefix or f"{name}_"
        raise SystemExit(f"make_models: no model {name!r} in python/zoo.py")
    stem = os.path.splitext(os.path.basename(source))[0]
    if source.endswith(".json"):
        with open(source) as f:
            mod = tvm.ir.load_json(f.read())
    elif source.endswith(".py"):
        mod = runpy.run_path(source).get("mod")
    else:
        raise SystemExit(f"make_models: {source}: expected zoo:NAME, FILE.py or FILE.json")
    if not isinstance(mod, tvm.IRModule):
        raise SystemExit(f"make_models: {source} gives no IRModule (got {type(mod).__name__})")
    return mod, prefix or f"{stem}_"


def expected_platform(triple):
    return 7 if triple.endswith("-simulator") else 2


def check_macho(path, platform, min_os):
    """Raise unless `path` is an arm64 Mach-O object for `platform` (minimum OS `min_os`)."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 32:
        raise SystemExit(f"make_models: {path}: too short for Mach-O")
    magic, cpu, _sub, ftype, ncmds, _size, _flags, _res = struct.unpack_from("<8I", data, 0)
    if magic != MH_MAGIC_64 or cpu != CPU_TYPE_ARM64 or ftype != MH_OBJECT:
        raise SystemExit(f"make_models: {path}: not an arm64 Mach-O object "
                         f"(magic {magic:#x}, cpu {cpu:#x}, type {ftype})")
    off, found = 32, None
    for _ in range(ncmds):
        cmd, size = struct.unpack_from("<2I", data, off)
        if cmd == LC_BUILD_VERSION:
            plat, minos = struct.unpack_from("<2I", data, off + 8)
            found = (plat, f"{minos >> 16}.{(minos >> 8) & 0xFF}")
        off += size
    if found is None:
        raise SystemExit(f"make_models: {path}: no LC_BUILD_VERSION load command")
    if found[0] != platform or (min_os and found[1] != min_os):
        raise SystemExit(f"make_models: {path}: platform {PLATFORMS.get(found[0], found[0])} "
                         f"{found[1]}, expected {PLATFORMS[platform]} {min_os}")
    return f"arm64 Mach-O object, {PLATFORMS[found[0]]} {found[1]}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("specs", nargs="+", metavar="SPEC")
    ap.add_argument("--out", default=os.path.join(ROOT, "ios-app", "Models"))
    ap.add_argument("--triple", default="arm64-apple-ios14.0",
                    help="LLVM target triple (the simulator: arm64-apple-ios14.0-simulator)")
    ap.add_argument("--mcpu", default="", help="LLVM CPU, e.g. apple-a14 (default: generic arm64)")
    a = ap.parse_args()

    llvm_ar = os.environ.get("LLVM_AR") or shutil.which("llvm-ar")
    if not llvm_ar:
        raise SystemExit("make_models: no llvm-ar (set LLVM_AR): GNU ar writes no symbol table "
                         "for Mach-O objects")
    triple_os = a.triple.split("-")[2] if a.triple.count("-") >= 2 else ""
    min_os = triple_os[3:] if triple_os.startswith("ios") else ""
    platform = expected_platform(a.triple)
    target = {"kind": "llvm", "mtriple": a.triple}
    if a.mcpu:
        target["mcpu"] = a.mcpu

    os.makedirs(a.out, exist_ok=True)
    objects, prefixes = [], []
    with tempfile.TemporaryDirectory() as scratch:
        for spec in a.specs:
            mod, prefix = load_module(spec)
            if prefix in prefixes:
                raise SystemExit(f"make_models: prefix {prefix!r} given twice")
            prefixes.append(prefix)
            # A Target object, not a dict: 0.27's relax.build trips on a plain dict.
            ex = tvm.compile(mod.with_attr("system_lib_prefix", prefix), target=tvm.target.Target(target))
            tar = os.path.join(scratch, f"{prefix}.tar")
            ex.export_library(tar)
            unpacked = os.path.join(scratch, prefix)
            with tarfile.open(tar) as tf:
                tf.extractall(unpacked)
            for name in sorted(os.listdir(unpacked)):
                obj = os.path.join(a.out, name if name.startswith(prefix) else prefix + name)
                shutil.copyfile(os.path.join(unpacked, name), obj)
                print(f"{os.path.relpath(obj)}: {check_macho(obj, platform, min_os)}")
                objects.append(obj)
    archive = os.path.join(a.out, "libmodels.a")
    if os.path.exists(archive):
        os.remove(archive)
    subprocess.run([llvm_ar, "rcs", "--format=darwin", archive, *objects], check=True)
    with open(os.path.join(a.out, "models.txt"), "w") as f:
        f.write("".join(p + "\n" for p in prefixes))
    print(f"{os.path.relpath(archive)}: {len(objects)} objects, prefixes {', '.join(prefixes)} "
          f"({a.triple}); link it with -force_load (ios-app/Models.xcconfig)")


if __name__ == "__main__":
    main()
