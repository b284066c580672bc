#!/usr/bin/env python3
"""Fails when a tracked file refers to what the repository cannot show its reader.

The repository must stand on its own: its text names no issue-tracker numbers, no working
sessions, and no paths outside the checkout (a sibling `../shared` folder, an absolute
`/work/...` path). The `.gpu` bundle folder is what scripts/gpu-bundle.sh writes and
.gitignore leaves out: shell code may use it, but no document or comment refers to files in
it. Public headers under include/ carry no measured figures of a particular machine (H200) and
no dates: a comment that needs a figure points to docs/design.md by section name instead.

Scanned: the files git tracks (or, outside a git checkout, every file below the root except
build folders (named build* or holding a CMakeCache.txt) and hidden ones). Not scanned: the benchmark run records under bench/results/ other
than their Markdown (raw logs and JSON keep the paths and names the run printed), binary
files, and this checker.

usage: check_references.py ROOT     exit 0 clean, 1 with one line per reference found
"""
import os
import re
import subprocess
import sys

EVERYWHERE = [
    (re.compile(r"\bissues?\s*#?\s*\d+", re.I), "an issue number"),
    (re.compile(r"\bsessions?\b", re.I), "a session"),
    (re.compile(r"\.\./shared\b"), "a path outside the repository"),
    (re.compile(r"(?<![\w.])/work/"), "a path outside the repository"),
]
GPU_BUNDLE = (re.compile(r"(?<![\w])\.gpu/"), "a file in the ignored .gpu bundle folder")
HEADER_ONLY = [
    (re.compile(r"\bH200\b"), "a machine's measured figure in a header"),
    (re.compile(r"\b20\d\d-[01]\d-[0-3]\d\b"), "a date in a header"),
]
SHELL_SUFFIXES = (".sh", ".bash")
SELF = "tests/hygiene/check_references.py"


def tracked_files(root):
    try:
        out = subprocess.run(["git", "-C", root, "ls-files", "-z"], check=True,
                             capture_output=True).stdout
        return [p for p in out.decode("utf-8", "replace").split("\0") if p]
    except (OSError, subprocess.CalledProcessError):
        files = []
        for d, dirs, names in os.walk(root):
            dirs[:] = [x for x in dirs if not x.startswith(".") and not x.startswith("build")
                       and not os.path.exists(os.path.join(d, x, "CMakeCache.txt"))]
            files += [os.path.relpath(os.path.join(d, n), root) for n in names]
        return files


def scanned(rel):
    if rel == SELF:
        return False
    if rel.startswith("bench/results/") and not rel.endswith(".md"):
        return False
    return True


def is_comment(line):
    s = line.lstrip()
    return s.startswith("#") and not s.startswith("#!")


def main():
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    root = sys.argv[1]
    found = 0
    for rel in sorted(tracked_files(root)):
        rel = rel.replace(os.sep, "/")
        if not scanned(rel):
            continue
        path = os.path.join(root, rel)
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError:
            continue  # a tracked file deleted in the working tree
        if b"\0" in data[:8192]:
            continue  # binary
        text = data.decode("utf-8", "replace")
        shell = rel.endswith(SHELL_SUFFIXES) or rel == ".gitignore"
        header = rel.startswith("include/")
        for n, line in enumerate(text.splitlines(), 1):
            checks = list(EVERYWHERE)
            if not shell or is_comment(line):
                checks.append(GPU_BUNDLE)
            if header:
                checks += HEADER_ONLY
            for pattern, what in checks:
                m = pattern.search(line)
                if m:
                    print(f"{rel}:{n}: {what}: '{m.group(0)}' in: {line.strip()[:120]}")
                    found += 1
    if found:
        print(f"check_references: {found} reference(s) to what the repository cannot show",
              file=sys.stderr)
        return 1
    print("check_references: clean")
    return 0


if __name__ == "__main__":
    sys.exit(main())
