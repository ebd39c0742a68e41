#!/usr/bin/env python3
"""Links the app's manifest and resources with Debian's aapt2 (Android 10), whose framework is
API 29, for scripts/build-apk.sh and scripts/test-android-app.sh.

    aapt2_link.py --aapt2 aapt2 --framework framework-res.apk --manifest AndroidManifest.xml
                  --package org.mote.rpcapp --min-sdk 24 --target-sdk 35 --java GEN
                  -o linked.apk res.zip

The manifest uses three things newer than API 29; each gets through as follows, and anything
else aapt2 rejects or warns about still fails the link:
- <uses-native-library> (API 31) in <application> and <property> (API 31) in <service>: aapt2
  knows neither element. With --warn-manifest-validation it warns and copies them into the
  binary manifest unchanged (their attributes, android:name, android:required and
  android:value, are API 1). Only these two warnings are accepted.
- foregroundServiceType="specialUse" (API 34): the API 29 attribute has no such flag, and
  aapt2 refuses the name and a number alike. The manifest is linked with the placeholder
  "dataSync" (0x1, known to API 29), then that one attribute's value in the binary manifest
  is set to 0x40000000 (ServiceInfo.FOREGROUND_SERVICE_TYPE_SPECIAL_USE), the value a current
  aapt2 writes for "specialUse".
The package attribute (which the Gradle plugin wants left out of the source) is inserted.
"""
import argparse
import re
import struct
import subprocess
import sys
import zipfile

FGS_TYPE_ATTR = 0x01010599  # android:foregroundServiceType
PLACEHOLDER = ("dataSync", 0x1)
SPECIAL_USE = 0x40000000
TYPE_INT_HEX = 0x11
ALLOWED_WARNINGS = (
    "unexpected element <uses-native-library> found in <manifest><application>.",
    "unexpected element <property> found in <manifest><application><service>.",
)


def fail(msg):
    print("aapt2_link: ERROR: " + msg, file=sys.stderr)
    sys.exit(1)


def prepare(text, package):
    """The manifest aapt2 is given: package inserted, specialUse replaced by the placeholder."""
    text, n = re.subn(r"<manifest ", '<manifest package="%s" ' % package, text, count=1)
    if n != 1:
        fail("no <manifest element")
    text, n = re.subn(r'android:foregroundServiceType="specialUse"',
                      'android:foregroundServiceType="%s"' % PLACEHOLDER[0], text)
    if n != 1:
        fail('expected one android:foregroundServiceType="specialUse", found %d' % n)
    return text


def set_fgs_type(axml):
    """Sets the one foregroundServiceType attribute of the binary manifest from the placeholder
    to specialUse; fails unless there is exactly one, holding the placeholder."""
    data = bytearray(axml)
    kind, header, size = struct.unpack_from("<HHI", data, 0)
    if kind != 0x0003 or size != len(data):
        fail("AndroidManifest.xml is not a binary XML document")
    res_ids = []
    found = []
    off = header
    while off < len(data):
        kind, header, size = struct.unpack_from("<HHI", data, off)
        if size < 8 or off + size > len(data):
            fail("malformed chunk at %d" % off)
        if kind == 0x0180:  # resource map: string index -> attribute resource ID
            res_ids = list(struct.unpack_from("<%dI" % ((size - header) // 4), data, off + header))
        elif kind == 0x0102:  # start element
            start, attr_size, count = struct.unpack_from("<HHH", data, off + header + 8)
            for i in range(count):
                a = off + header + start + i * attr_size
                name = struct.unpack_from("<I", data, a + 4)[0]
                if name < len(res_ids) and res_ids[name] == FGS_TYPE_ATTR:
                    found.append(a)
        off += size
    if len(found) != 1:
        fail("expected one foregroundServiceType attribute in the binary manifest, found %d"
             % len(found))
    a = found[0]
    raw, _, _, dtype, value = struct.unpack_from("<IHBBI", data, a + 8)
    if dtype != TYPE_INT_HEX or value != PLACEHOLDER[1] or raw != 0xFFFFFFFF:
        fail("foregroundServiceType is (type 0x%x) 0x%x, raw %d: not the placeholder"
             % (dtype, value, raw))
    struct.pack_into("<I", data, a + 16, SPECIAL_USE)
    return bytes(data)


def replace_manifest(apk, patch):
    with zipfile.ZipFile(apk) as z:
        entries = [(i, z.read(i.filename)) for i in z.infolist()]
    with zipfile.ZipFile(apk, "w") as z:
        for info, body in entries:
            if info.filename == "AndroidManifest.xml":
                body = patch(body)
            z.writestr(info, body)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--aapt2", default="aapt2")
    p.add_argument("--framework", required=True)
    p.add_argument("--manifest", required=True)
    p.add_argument("--package", required=True)
    p.add_argument("--min-sdk", required=True)
    p.add_argument("--target-sdk", required=True)
    p.add_argument("--java", required=True)
    p.add_argument("--prepared", required=True, help="where the manifest given to aapt2 goes")
    p.add_argument("-o", dest="out", required=True)
    p.add_argument("resources", nargs="+")
    args = p.parse_args()

    with open(args.manifest, encoding="utf-8") as f:
        prepared = prepare(f.read(), args.package)
    with open(args.prepared, "w", encoding="utf-8") as f:
        f.write(prepared)
    cmd = [args.aapt2, "link", "-I", args.framework, "--manifest", args.prepared,
           "--warn-manifest-validation", "--min-sdk-version", args.min_sdk,
           "--target-sdk-version", args.target_sdk, "--java", args.java, "-o", args.out]
    r = subprocess.run(cmd + args.resources, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       universal_newlines=True)
    sys.stderr.write(r.stdout)
    if r.returncode != 0:
        fail("aapt2 link failed (exit %d)" % r.returncode)
    unexpected = [line for line in r.stdout.splitlines()
                  if line.strip() and not line.endswith(ALLOWED_WARNINGS)]
    if unexpected:
        fail("aapt2 link said what is not expected: " + " | ".join(unexpected))
    missing = [w for w in ALLOWED_WARNINGS if w not in r.stdout]
    if missing:
        # The elements are gone from the manifest, or aapt2 changed: either way look again.
        fail("aapt2 link did not warn as expected about: " + " | ".join(missing))
    replace_manifest(args.out, set_fgs_type)


if __name__ == "__main__":
    main()
