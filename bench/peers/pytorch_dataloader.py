#!/usr/bin/env python3
"""PyTorch DataLoader + h5py over gpufeed-bench's HDF5 file: the peer gpufeed is measured against.

Two ways PyTorch users read an HDF5 dataset of fixed-size records (N, record_bytes):
  shuffled    Dataset.__getitem__(i) reads one row with h5py; DataLoader(shuffle=True,
              num_workers=W, pin_memory=True) batches them (per-sample random order).
  contiguous  a sampler yields slices [s, s + batch) in order, and __getitem__(slice) reads the
              whole batch with one h5py call (no per-sample shuffling: the fast, less random way).
Each batch is moved with .to(device, non_blocking=True); the clock stops after a final
torch.cuda.synchronize(). The h5py file is opened lazily in each worker: h5py handles must not
cross fork().

Run it on the file gpufeed-bench generated (same records, so same bytes), e.g.
  python3 bench/peers/pytorch_dataloader.py \\
      --file gpufeed-bench-data/hdf5_r16384_n81920.h5 --workers 1,2,4,8,14,16 --json > torch.json
and pass torch.json to gpufeed-bench --peer (the ">= 50x PyTorch" target) and to bench/plot.py.
Prints one JSON array (--json) with the same fields as gpufeed-bench; a table on stderr.
Needs only torch, h5py and numpy.
"""

import argparse
import json
import os
import sys
import time

import h5py
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, Sampler

MASK = (1 << 64) - 1


def splitmix64(state):
    state = (state + 0x9E3779B97F4A7C15) & MASK
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return state, z ^ (z >> 31)


def expected_record(i, nbytes):
    """gpufeed-bench's fill_record(i) (bench/bench_data.hpp), to check the file holds its data."""
    out = bytearray(nbytes)
    s = (i * 0x2545F4914F6CDD1D + 0x1234567) & MASK
    for at in range(0, nbytes, 32):
        s, r = splitmix64(s)
        n = min(32, nbytes - at)
        if (r & 0xFF) < 100:
            for k in range(0, n, 8):
                s, v = splitmix64(s)
                m = min(8, n - k)
                out[at + k:at + k + m] = v.to_bytes(8, "little")[:m]
        else:
            out[at:at + n] = bytes([(r >> 8) & 0xFF]) * n
    return bytes(out)


class H5Records(Dataset):
    """Rows of an (N, ...) HDF5 dataset; the file is opened on first use in each process."""

    def __init__(self, path, dataset):
        self.path, self.dataset = path, dataset
        with h5py.File(path, "r") as f:
            d = f[dataset]
            self.n = int(d.shape[0])
            self.record_bytes = int(np.prod(d.shape[1:])) * d.dtype.itemsize
        self._data = None
        self._pid = None

    def _rows(self):
        if self._data is None or self._pid != os.getpid():
            self._data = h5py.File(self.path, "r")[self.dataset]
            self._pid = os.getpid()
        return self._data

    def __len__(self):
        return self.n

    def __getitem__(self, idx):
        # An int: one record. A slice: a whole contiguous batch in one h5py read.
        return torch.from_numpy(np.ascontiguousarray(self._rows()[idx]))


class SliceBatches(Sampler):
    """Contiguous batches [s, s + batch), in file order (drop_last)."""

    def __init__(self, n, batch):
        self.n, self.batch = n, batch

    def __iter__(self):
        for s in range(0, self.n - self.batch + 1, self.batch):
            yield slice(s, s + self.batch)

    def __len__(self):
        return self.n // self.batch


def batches_forever(loader):
    while True:
        for b in loader:
            yield b


def run_case(args, mode, workers, device):
    ds = H5Records(args.file, args.dataset)
    batch = args.batch or max(1, int(args.batch_mib * (1 << 20)) // ds.record_bytes)
    batch = min(batch, max(1, ds.n // 4))
    common = dict(num_workers=workers, pin_memory=device.type == "cuda",
                  persistent_workers=workers > 0)
    if workers > 0:
        common["prefetch_factor"] = args.prefetch_factor
    if mode == "shuffled":
        loader = DataLoader(ds, batch_size=batch, shuffle=True, drop_last=True, **common)
    else:
        loader = DataLoader(ds, sampler=SliceBatches(ds.n, batch), batch_size=None, **common)
    it = batches_forever(loader)
    for _ in range(args.warmup):
        next(it).to(device, non_blocking=True)
    if device.type == "cuda":
        torch.cuda.synchronize()
    batches = records = nbytes = 0
    waited = 0.0
    t0 = time.perf_counter()
    while batches < args.min_batches or time.perf_counter() - t0 < args.seconds:
        w0 = time.perf_counter()
        b = next(it)
        waited += time.perf_counter() - w0
        b = b.to(device, non_blocking=True)
        batches += 1
        records += b.shape[0]
        nbytes += b.numel() * b.element_size()
    if device.type == "cuda":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - t0
    del it, loader  # stops the workers
    rec = ds.record_bytes
    size = f"{rec >> 10}KiB" if rec % 1024 == 0 else f"{rec}B"
    pinned = 0
    if device.type == "cuda" and hasattr(torch.cuda, "host_memory_stats"):
        pinned = torch.cuda.host_memory_stats().get("allocated_bytes.all.current", 0)
    return {
        "case": f"pytorch/{mode}/{size}/w{workers}",
        "loader": "pytorch",
        "target": device.type,
        "dataset": f"hdf5/{size}",
        "format": "hdf5",
        "order": "shuffled" if mode == "shuffled" else "sequential",
        "record_bytes": rec,
        "workers": workers,
        "prefetch": args.prefetch_factor if workers > 0 else 0,
        "streams": 0,
        "batch_size": batch,
        "batches": batches,
        "records": records,
        "bytes": nbytes,
        "seconds": seconds,
        "records_per_s": records / seconds,
        "gb_per_s": nbytes / seconds / 1e9,
        "stall_fraction": waited / seconds,
        "pinned_bytes": pinned,
        "mode": mode,
        "torch": torch.__version__,
        "h5py": h5py.__version__,
        "file": os.path.abspath(args.file),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--file", required=True, help="HDF5 file written by gpufeed-bench")
    ap.add_argument("--dataset", default="data")
    ap.add_argument("--batch", type=int, default=0, help="records per batch (default: --batch-mib)")
    ap.add_argument("--batch-mib", type=float, default=8.0)
    ap.add_argument("--workers", default="1,2,4,8,12,16",
                    help="DataLoader num_workers values (capped at the CPU count)")
    ap.add_argument("--mode", choices=["shuffled", "contiguous", "both"], default="both")
    ap.add_argument("--prefetch-factor", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=5.0, help="timed seconds per case")
    ap.add_argument("--min-batches", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=3, help="untimed batches per case")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--json", action="store_true", help="print a JSON array on stdout")
    ap.add_argument("--no-verify", action="store_true",
                    help="skip checking that the file holds gpufeed-bench's records")
    args = ap.parse_args()

    device = torch.device(args.device)
    cpus = os.cpu_count() or 1
    workers = sorted({min(int(w), cpus) for w in args.workers.split(",") if w.strip()})
    modes = ["shuffled", "contiguous"] if args.mode == "both" else [args.mode]
    if not args.no_verify:
        ds = H5Records(args.file, args.dataset)
        for i in {0, ds.n // 2, ds.n - 1}:
            if ds[i].numpy().tobytes() != expected_record(i, ds.record_bytes):
                sys.exit(f"{args.file}: record {i} is not gpufeed-bench's data")
    results = []
    for mode in modes:
        for w in workers:
            r = run_case(args, mode, w, device)
            results.append(r)
            print(f"{r['case']:<34} {r['records_per_s']:>10.0f} records/s {r['gb_per_s']:>8.3f} GB/s"
                  f"  stall {r['stall_fraction']:.2f}  batch {r['batch_size']}", file=sys.stderr)
    if args.json:
        json.dump(results, sys.stdout, indent=1)
        print()


if __name__ == "__main__":
    main()
