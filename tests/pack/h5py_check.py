#!/usr/bin/env python3
"""h5py's side of the pack codec tests: what users' tools read from gpufeed pack's shards.

usage: h5py_check.py shards OUT_DIR INPUT_ROOT
         Reads every HDF5 shard listed in OUT_DIR/manifest.json with h5py (+ hdf5plugin's
         filters) and checks record i equals the input file manifest["names"][i] under
         INPUT_ROOT, and the labels against the manifest's label names. Zstd (32015), for which
         no Debian plugin exists, is read as h5py's raw chunks (read_direct_chunk) through
         python3-zstandard, as the Zstd plugin would.
       h5py_check.py rows OUT_DIR SOURCE.h5 DATASET
         The repacked fixed-layout shards in OUT_DIR hold SOURCE.h5's DATASET rows in order.
       h5py_check.py make-gzip FILE.h5 ROWS COLS
         Writes float32 "data" (ROWS x COLS) with compression="gzip", shuffle=True, chunks=True
         (h5py's automatic chunks) and int64 "labels" = row % 7, as users write them.
Exits 77 (skipped) when h5py, hdf5plugin or zstandard is missing; 1 with a message on a mismatch.
"""
import json
import os
import sys

try:
    import numpy as np
    import h5py
    import hdf5plugin  # noqa: F401  (registers the plugin filters with h5py)
    import zstandard
except ImportError as e:
    print(f"h5py checks need python3-h5py python3-hdf5plugin python3-zstandard: {e}")
    sys.exit(77)


def fail(msg):
    print(msg)
    sys.exit(1)


def read_data(d):
    """The dataset's bytes as h5py reads them, Zstd chunks decoded here (no Debian plugin)."""
    plist = d.id.get_create_plist()
    ids = [plist.get_filter(i)[0] for i in range(plist.get_nfilters())]
    if 32015 not in ids:
        return d[()]
    if ids != [32015]:
        fail(f"unexpected filters {ids}")
    out = np.zeros(d.shape, dtype=d.dtype)
    chunk = d.chunks
    dec = zstandard.ZstdDecompressor()
    for start in range(0, d.shape[0], chunk[0]):
        off = (start,) + (0,) * (len(d.shape) - 1)
        mask, raw = d.id.read_direct_chunk(off)
        full = np.frombuffer(dec.decompress(raw), dtype=d.dtype).reshape(chunk)
        n = min(chunk[0], d.shape[0] - start)
        out[start:start + n] = full[:n]
    return out


def shards(out, root):
    m = json.load(open(os.path.join(out, "manifest.json")))
    label_of = {v: k for k, v in m["labels"].items()}
    for s in m["shards"]:
        with h5py.File(os.path.join(out, s["file"]), "r") as f:
            data = read_data(f["data"]).tobytes()
            off = f["offsets"][()]
            labels = f["labels"][()] if "labels" in f else None
            if len(off) != s["records"] + 1:
                fail(f"{s['file']}: {len(off)} offsets for {s['records']} records")
            for i in range(s["records"]):
                name = m["names"][s["first_record"] + i]
                want = open(os.path.join(root, name), "rb").read()
                if data[off[i]:off[i + 1]] != want:
                    fail(f"{s['file']} record {i}: h5py read other bytes than input '{name}'")
                if labels is not None and label_of[int(labels[i])] != name.split("/")[0]:
                    fail(f"{s['file']} record {i}: label {labels[i]} is not '{name}''s folder")


def rows(out, source, dataset):
    m = json.load(open(os.path.join(out, "manifest.json")))
    with h5py.File(source, "r") as f:
        want = f[dataset][()]
    got = []
    for s in m["shards"]:
        with h5py.File(os.path.join(out, s["file"]), "r") as f:
            got.append(read_data(f["data"]))
    got = np.concatenate(got)
    if got.dtype != want.dtype or got.shape != want.shape or got.tobytes() != want.tobytes():
        fail(f"repacked rows differ from {source}:{dataset} ({got.dtype} {got.shape}; "
             f"source {want.dtype} {want.shape})")


def make_gzip(path, n, cols):
    rng = np.random.default_rng(5)
    a = (np.round(rng.standard_normal((n, cols)) * 4) / 8).astype(np.float32)
    with h5py.File(path, "w") as f:
        f.create_dataset("data", data=a, compression="gzip", shuffle=True, chunks=True)
        f.create_dataset("labels", data=np.arange(n, dtype=np.int64) % 7)


def make_f16(path, n, cols):
    """float16 rows: normal values, subnormals, zeros of both signs, infinities and a NaN."""
    rng = np.random.default_rng(7)
    a = (rng.standard_normal((n, cols)) * 100).astype(np.float16)
    a[0, :6] = np.array([6e-8, -6e-8, 0.0, -0.0, np.inf, -np.inf], dtype=np.float16)
    a[1, 0] = np.float16(np.nan)
    with h5py.File(path, "w") as f:
        f.create_dataset("data", data=a, chunks=(7, cols), compression="gzip")


cmd = sys.argv[1]
if cmd == "shards":
    shards(sys.argv[2], sys.argv[3])
elif cmd == "rows":
    rows(sys.argv[2], sys.argv[3], sys.argv[4])
elif cmd == "make-gzip":
    make_gzip(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
elif cmd == "make-f16":
    make_f16(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
else:
    fail(f"unknown command {cmd}")
