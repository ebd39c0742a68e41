#!/usr/bin/env python3
"""Bring a work copy to a checkout's content, keeping what is unchanged untouched.

    work_copy.py CHECKOUT WORK

Cargo decides what to rebuild from file modification times. Every file of a fresh clone is
new, so a build in a fresh clone redoes every crate of the workspace (and, in target/, every
dependency) even when a cache of an earlier build sits next to it. scripts/test.sh therefore
runs in WORK, a folder at a fixed path in the cache, after this script has made WORK's files
equal to CHECKOUT's:

- the checkout's files are those git lists (tracked, plus untracked ones not ignored, as the
  next commit would have them; tracked files deleted from the working tree are left out);
- a file whose bytes and kind are already equal in WORK is not written, so it keeps its old
  modification time and cargo sees it unchanged; any other is written anew (time: now), so
  cargo rebuilds what depends on it, exactly as after an edit;
- everything else in WORK is removed, except folders named `target` and `.build` (cargo's and
  SwiftPM's build folders, whose staleness their tools check themselves) and WORK/.git (an
  empty repository, so that scripts asking git for the top-level folder find WORK).

Prints one line: how many files were kept, written and removed.
"""
import filecmp
import os
import shutil
import stat
import subprocess
import sys

KEPT_FOLDERS = {"target", ".build"}


def checkout_files(checkout):
    out = subprocess.run(
        ["git", "-C", checkout, "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        check=True,
        stdout=subprocess.PIPE,
    ).stdout
    names = set()
    for raw in out.split(b"\0"):
        if raw and os.path.lexists(os.path.join(checkout, os.fsdecode(raw))):
            names.add(os.fsdecode(raw))
    return names


def remove(path):
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)  # removes symbolic links inside without following them
    else:
        os.unlink(path)


def sync_one(src, dst):
    """Returns True when dst was (re)written."""
    s = os.lstat(src)
    if stat.S_ISLNK(s.st_mode):
        target = os.readlink(src)
        if os.path.islink(dst) and os.readlink(dst) == target:
            return False
        if os.path.lexists(dst):
            remove(dst)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        os.symlink(target, dst)
        return True
    mode = stat.S_IMODE(s.st_mode)
    if os.path.isfile(dst) and not os.path.islink(dst) and filecmp.cmp(src, dst, shallow=False):
        if stat.S_IMODE(os.lstat(dst).st_mode) != mode:
            os.chmod(dst, mode)  # a mode change alone leaves the modification time
        return False
    if os.path.lexists(dst):
        remove(dst)
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    shutil.copyfile(src, dst)
    os.chmod(dst, mode)
    return True


def main():
    if len(sys.argv) != 3:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    checkout, work = (os.path.abspath(p) for p in sys.argv[1:])
    names = checkout_files(checkout)
    os.makedirs(work, exist_ok=True)
    if not os.path.isdir(os.path.join(work, ".git")):
        subprocess.run(["git", "init", "-q", work], check=True)

    kept = written = removed = 0
    # First remove what the checkout does not have (so that no file stands where a folder of
    # the checkout goes, nor a folder where a file goes), then write what differs.
    wanted_dirs = {""}
    for name in names:
        parts = name.split("/")
        for i in range(1, len(parts)):
            wanted_dirs.add("/".join(parts[:i]))
    for dirpath, dirnames, filenames in os.walk(work, topdown=True):
        rel = os.path.relpath(dirpath, work)
        rel = "" if rel == "." else rel
        keep_dirs = []
        for d in dirnames:
            r = f"{rel}/{d}" if rel else d
            p = os.path.join(dirpath, d)
            if (rel == "" and d == ".git") or d in KEPT_FOLDERS:
                continue
            if os.path.islink(p):
                if r not in names:
                    os.unlink(p)
                    removed += 1
            elif r in wanted_dirs:
                keep_dirs.append(d)
            else:
                remove(p)
                removed += 1
        dirnames[:] = keep_dirs
        for f in filenames:
            r = f"{rel}/{f}" if rel else f
            if r not in names:
                os.unlink(os.path.join(dirpath, f))
                removed += 1
    for name in sorted(names):
        if sync_one(os.path.join(checkout, name), os.path.join(work, name)):
            written += 1
        else:
            kept += 1
    print(f"work copy {work}: {kept} files kept, {written} written, {removed} removed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
