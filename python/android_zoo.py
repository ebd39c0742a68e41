"""Build the model zoo as Android shared libraries, for the checks of scripts/test-android-bionic.sh.

    python android_zoo.py --abi arm64-v8a --out DIR

Every model of zoo.py is compiled for the ABI's Android triple (aarch64-linux-android or
x86_64-linux-android) and exported the way an Android developer exports it, with
`export_library(path, fcompile=...)`: TVM's `ndk.create_shared` when TVM_NDK_CC names the
NDK's clang, else mote_tvm.android.create_shared (ld.lld; docs/android.md section 7). Nothing
Mote-specific is added to the link. Writes:

    DIR/NAME.so                     one per zoo model (Relax models and kernel-only libraries)
    DIR/libzoo_syslib.so            the system-library builds of zoo.SYSTEM_LIB_MODELS (prefix
                                    NAME_), linked into one app library, as an app would link
                                    them beside its own code
    DIR/manifest.json               {"abi", "models": [...], "syslib": {...}}

These files are only ever read as ELF files here (nothing can run Android code): the checks
resolve their symbols by bionic's rules against the AAR's and the APK's libraries.
"""
import argparse
import json
import os
import sys
import tarfile
import tempfile

import tvm

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zoo  # noqa: E402
from mote_tvm import android  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--abi", choices=sorted(android.ABIS), required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    fcompile = android.create_shared_for(args.abi)
    target = android.target(args.abi)
    models = [make() for make in zoo.MODELS]
    manifest = {"abi": args.abi, "models": [], "syslib": None}
    for model in models:
        path = os.path.join(args.out, f"{model.name}.so")
        tvm.compile(model.mod, target=target).export_library(path, fcompile=fcompile)
        manifest["models"].append({"name": model.name, "file": f"{model.name}.so", "kind": model.kind})
        print(f"android_zoo: {args.abi} {model.name}.so", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="mote-android-syslib-") as tmp:
        objects, prefixes = [], []
        for model in models:
            if model.name not in zoo.SYSTEM_LIB_MODELS:
                continue
            prefix = f"{model.name}_"
            tar = os.path.join(tmp, f"{model.name}.tar")
            ex = tvm.compile(model.mod.with_attr("system_lib_prefix", prefix), target=target)
            ex.export_library(tar)
            objdir = os.path.join(tmp, model.name)
            with tarfile.open(tar) as tf:
                tf.extractall(objdir)
                objects += [os.path.join(objdir, n) for n in sorted(tf.getnames())]
            prefixes.append(prefix)
        fcompile(os.path.join(args.out, "libzoo_syslib.so"), objects)
    manifest["syslib"] = {"file": "libzoo_syslib.so", "prefixes": prefixes}
    with open(os.path.join(args.out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    print(f"android_zoo: {len(models)} models and libzoo_syslib.so ({len(prefixes)} system-library models) in {args.out}",
          file=sys.stderr)


if __name__ == "__main__":
    main()
