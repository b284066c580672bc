#!/usr/bin/env python3
"""Writes the HDF5 files compressed_bench reads, the way users write them: with h5py.

  make_h5py_data.py gzip OUT.h5 [--rows N]      float32 rows of 4096 (16 KiB),
        compression="gzip", shuffle=True, chunks=True (h5py picks the chunk shape: for
        (N, 4096) float32 it cuts rows into column blocks, so one row spans many chunks);
        "labels": int64, 100 classes in contiguous runs of rows (as packed class folders are)
  make_h5py_data.py quality OUT.h5 [--rows N]   the same layout and labels (131072 rows: 2 GiB
        decoded, so the default 128 MiB window is 1/16 of it), all values zero: the order-quality
        case reads only the labels and the chunk layout, and zeros compress in no time

The values are smooth signals plus small noise, quantised to 1/1024: gzip with the shuffle
filter compresses them about 2-3:1, like sensor or feature data (random floats would not
compress, and constant ones would compress absurdly). Needs numpy and h5py.
"""

import argparse
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("kind", choices=["gzip", "quality"])
    ap.add_argument("out")
    ap.add_argument("--rows", type=int, default=0, help="default: 32768 (gzip), 131072 (quality)")
    ap.add_argument("--classes", type=int, default=100)
    a = ap.parse_args()
    import h5py
    import numpy as np

    cols = 4096
    rows = a.rows or (32768 if a.kind == "gzip" else 131072)
    rng = np.random.default_rng(7)
    with h5py.File(a.out, "w") as f:
        d = f.create_dataset("data", shape=(rows, cols), dtype="float32",
                             compression="gzip", shuffle=True, chunks=True)
        x = np.linspace(0, 8 * np.pi, cols, dtype=np.float32)
        step = 1024
        for r in range(0, rows, step):
            n = min(step, rows - r)
            if a.kind == "quality":
                d[r:r + n] = np.zeros((n, cols), dtype=np.float32)
                continue
            freq = rng.uniform(0.5, 4.0, size=(n, 1)).astype(np.float32)
            phase = rng.uniform(0, 2 * np.pi, size=(n, 1)).astype(np.float32)
            v = np.sin(x[None, :] * freq + phase) + rng.normal(0, 0.01, size=(n, cols))
            d[r:r + n] = (np.round(v * 1024) / 1024).astype(np.float32)
        per = -(-rows // a.classes)
        f.create_dataset("labels", data=(np.arange(rows) // per).astype(np.int64))
        print(f"{a.out}: {rows} x {cols} float32, chunks {d.chunks}, "
              f"{a.classes} classes in runs of {per} rows", file=sys.stderr)


if __name__ == "__main__":
    main()
