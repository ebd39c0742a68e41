"""Export TVM models as Android shared libraries without the Android NDK.

TVM's own route for Android is `export_library(path, fcompile=tvm.contrib.ndk.create_shared)`
with `TVM_NDK_CC` naming the NDK's clang. Where there is no NDK, `create_shared` below does
the same job with LLVM's `ld.lld` (Debian's package `lld`):

    from mote_tvm import android
    ex = tvm.compile(mod, target=tvm.target.Target({"kind": "llvm", "mtriple": "aarch64-linux-android"}))
    ex.export_library("model.so", fcompile=android.create_shared)              # arm64-v8a
    ex.export_library("model.so", fcompile=android.create_shared_for("x86_64"))  # emulator

With `TVM_NDK_CC` set, it hands over to TVM's `ndk.create_shared` unchanged, so one build
script serves both. The output is what the NDK's clang links for a C shared library (see
docs/android.md, section 7): ELF shared object with a SONAME, DT_NEEDED libc.so, libm.so and
libdl.so (bionic resolves a dlopen'ed library's libc/libm imports through its own DT_NEEDED
closure, so they are required), 16 KB page alignment, GNU and SysV hash tables, no text
relocations. The TVM symbols the model imports (TVMFFIErrorSetRaisedFromCStrParts and, for
system-library objects, TVMFFIEnvModRegisterSystemLibSymbol and TVMBackend*) stay undefined:
Mote's JNI library provides them at load time (it is in the namespace's global group).
"""

import os
import shutil
import struct
import subprocess
import tempfile

ABIS = {
    # abi: (LLVM triple TVM compiles for, ELF e_machine, ld.lld emulation)
    "arm64-v8a": ("aarch64-linux-android", 183, "aarch64linux"),
    "x86_64": ("x86_64-linux-android", 62, "elf_x86_64"),
}
SYSTEM_LIBS = ("libc.so", "libm.so", "libdl.so")


def target(abi: str = "arm64-v8a"):
    """The TVM target for `abi` (a Target object: 0.27's relax.build trips on a plain dict)."""
    import tvm

    return tvm.target.Target({"kind": "llvm", "mtriple": ABIS[abi][0]})


def _empty_object(path: str, machine: int) -> None:
    """A relocatable ELF64 object with no contents: an input for linking SONAME-only stubs."""
    shstrtab = b"\0.shstrtab\0"
    shoff = 64 + ((len(shstrtab) + 7) & ~7)
    ident = b"\x7fELF" + bytes([2, 1, 1, 0]) + bytes(8)
    header = ident + struct.pack("<HHIQQQIHHHHHH", 1, machine, 1, 0, 0, shoff, 0, 64, 0, 0, 64, 2, 1)
    null = bytes(64)
    strsec = struct.pack("<IIQQQQIIQQ", 1, 3, 0, 0, 64, len(shstrtab), 0, 0, 1, 0)
    body = header + shstrtab + bytes(shoff - 64 - len(shstrtab)) + null + strsec
    with open(path, "wb") as f:
        f.write(body)


def _lld() -> str:
    lld = os.environ.get("MOTE_LLD") or shutil.which("ld.lld")
    if not lld:
        raise RuntimeError("mote_tvm.android: no ld.lld (apt-get install lld, or set MOTE_LLD); "
                           "with the NDK, set TVM_NDK_CC instead")
    return lld


def create_shared_for(abi: str):
    """An `fcompile` for `export_library` that links for `abi` (arm64-v8a or x86_64)."""
    if abi not in ABIS:
        raise ValueError(f"unknown ABI {abi!r} (one of {sorted(ABIS)})")
    triple, machine, emulation = ABIS[abi]

    def create_shared(output, objects, options=None):
        if os.environ.get("TVM_NDK_CC"):
            from tvm.contrib import ndk

            return ndk.create_shared(output, objects, options)
        if isinstance(objects, str):
            objects = [objects]
        for obj in objects:
            if not obj.endswith(".o"):
                raise RuntimeError(f"mote_tvm.android: {obj} is not an object file (export for an "
                                   f"llvm target with mtriple {triple}, so TVM emits objects)")
        with tempfile.TemporaryDirectory(prefix="mote-android-") as tmp:
            empty = os.path.join(tmp, "empty.o")
            _empty_object(empty, machine)
            for lib in SYSTEM_LIBS:
                subprocess.run([_lld(), "-m", emulation, "-shared", "-soname", lib, "-o",
                                os.path.join(tmp, lib), empty], check=True)
            cmd = [_lld(), "-m", emulation, "-shared", "-o", output,
                   "-soname", os.path.basename(output),
                   "-z", "max-page-size=16384", "-z", "text", "-z", "noexecstack", "-z", "now",
                   "--hash-style=both", "--build-id=sha1", "--eh-frame-hdr", "--no-as-needed",
                   *objects, *[os.path.join(tmp, lib) for lib in SYSTEM_LIBS], *(options or [])]
            res = subprocess.run(cmd, capture_output=True, text=True)
            if res.returncode != 0:
                raise RuntimeError(f"mote_tvm.android: ld.lld failed:\n{res.stderr}")

    create_shared.output_format = "so"
    create_shared.get_target_triple = lambda: triple
    return create_shared


create_shared = create_shared_for("arm64-v8a")
