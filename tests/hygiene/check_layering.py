#!/usr/bin/env python3
"""Fails when the public headers' layering rules are broken.

  - A public header that says it is a leaf header ("A leaf header (no gpufeed includes)": the
    order vocabulary, batch_view) includes no gpufeed header, so detail/ code and other public
    headers can name its types without pulling anything else in.
  - batch.hpp includes only what a batch uses: a user of gpufeed::batch does not pull in the
    loader's set-up (loader_config, sampler, target, NUMA, record transform or order headers).
  - Test-only observation points in library headers are compiled only for test targets: every
    line that declares one ("Test-only" comment, an `..._observer` variable or its use) lies
    inside `#ifdef GPUFEED_TESTING`.
  - The decoded-unit cache (detail/unit_cache/) is format-free, so that any source can cache its
    decode units in it: its headers reach no header of a source format or of CUDA (detail/hdf5/,
    detail/lmdb/, cuda/, hdf5_*.hpp, lmdb_*.hpp), directly or through others.
  - The sharded record space (detail/record_space/) is format-free, so that every source numbers,
    locates and opens its shards through it; so is the byte-source seam (detail/io/), which every
    source reads its shards' bytes through. Their headers reach no header of a source format or of
    CUDA, nor the HDF5, LMDB or CUDA libraries' headers, directly or through others.
  - No header is longer than 350 lines.

Reads include/ below ROOT only (no build).

usage: check_layering.py ROOT     exit 0 clean, 1 with one line per rule broken
"""
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"(gpufeed/[^"]+)"')
LEAF = re.compile(r"A leaf header \(no gpufeed includes\)")
BATCH_MAY_REACH = {"gpufeed/batch.hpp", "gpufeed/batch_view.hpp", "gpufeed/error.hpp"}
TEST_ONLY = re.compile(r"Test-only|\w+_observer\b")
UNIT_CACHE = "gpufeed/detail/unit_cache/"
RECORD_SPACE = "gpufeed/detail/record_space/"
FORMAT_FREE = {UNIT_CACHE: "the unit cache", "gpufeed/detail/io/": "the byte-source seam",
               RECORD_SPACE: "the record space"}
FORMAT_FREE_MAY_NOT_REACH = re.compile(
    r"^gpufeed/(detail/hdf5/|detail/lmdb/|cuda/|hdf5_|lmdb_)")
MAX_HEADER_LINES = 350  # a header is read in one sitting (docs/design.md, Layout)
SYSTEM_INCLUDE = re.compile(r"^\s*#\s*include\s+<([^>]+)>")
FORMAT_LIBRARY = re.compile(r"^(hdf5|H5\w*|lmdb|cuda\w*|cuda/|nvjpeg|nvcomp)")


def headers(inc):
    for d, _, files in os.walk(inc):
        for f in files:
            if f.endswith((".hpp", ".cuh")):
                p = os.path.join(d, f)
                yield os.path.relpath(p, inc).replace(os.sep, "/"), p


def includes(path):
    with open(path, encoding="utf-8") as f:
        return [m.group(1) for line in f if (m := INCLUDE.match(line))]


def system_includes(path):
    with open(path, encoding="utf-8") as f:
        return [m.group(1) for line in f if (m := SYSTEM_INCLUDE.match(line))]


def reach(inc, start):
    seen, todo = set(), [start]
    while todo:
        h = todo.pop()
        if h in seen:
            continue
        seen.add(h)
        p = os.path.join(inc, h)
        if os.path.exists(p):
            todo.extend(includes(p))
    return seen


def unguarded_test_hooks(path):
    """Lines naming a test-only hook outside #ifdef GPUFEED_TESTING."""
    bad, stack = [], []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            s = line.strip()
            if re.match(r"#\s*if", s):
                stack.append("GPUFEED_TESTING" in s and not s.startswith("#ifndef"))
            elif re.match(r"#\s*endif", s):
                if stack:
                    stack.pop()
            elif TEST_ONLY.search(line) and not any(stack):
                bad.append(n)
    return bad


def main():
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[-1])
        return 2
    inc = os.path.join(sys.argv[1], "include")
    problems = []
    for rel, path in sorted(headers(inc)):
        with open(path, encoding="utf-8") as f:
            text = f.read()
        lines = text.count("\n")
        if lines > MAX_HEADER_LINES:
            problems.append(f"include/{rel}: {lines} lines, more than {MAX_HEADER_LINES}; split it "
                            "where it holds more than one concept")
        if "/detail/" not in rel and LEAF.search(text):
            for h in includes(path):
                problems.append(f"include/{rel}: a leaf header includes {h}")
        for n in unguarded_test_hooks(path):
            problems.append(f"include/{rel}:{n}: a test-only hook outside #ifdef GPUFEED_TESTING")
    for rel, _ in sorted(headers(inc)):
        for area, what in FORMAT_FREE.items():
            if not rel.startswith(area):
                continue
            for h in sorted(reach(inc, rel)):
                if FORMAT_FREE_MAY_NOT_REACH.match(h):
                    problems.append(f"include/{rel}: reaches {h}; {what} is format-free")
                p = os.path.join(inc, h)
                if area != UNIT_CACHE and os.path.exists(p):
                    for s in system_includes(p):
                        if FORMAT_LIBRARY.match(s):
                            problems.append(f"include/{rel}: reaches <{s}> through {h}; "
                                            f"{what} is format-free")
    for h in sorted(reach(inc, "gpufeed/batch.hpp") - BATCH_MAY_REACH):
        problems.append(f"include/gpufeed/batch.hpp: reaches {h}, which a batch does not use")
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
