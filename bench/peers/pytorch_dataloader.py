#!/usr/bin/env python3
"""PyTorch DataLoader + h5py over gpufeed-bench's HDF5 file, tuned: the peer gpufeed is measured against.

The ways a PyTorch user reads an HDF5 dataset of fixed-size records (N, record_bytes):
  per-sample    Dataset.__getitem__(i) reads one row with h5py; DataLoader(batch_size=B,
                shuffle=True) collates them (the textbook way).
  sorted-batch  a sampler cuts a random permutation into batches and sorts each; __getitem__
                reads the whole batch with one h5py fancy-index call d[sorted_indices]
                (DataLoader(batch_size=None)); workers 0 = in the training process itself.
  contiguous    slices [s, s + B) in file order, one h5py read each (sequential: not shuffled,
                so never the "best shuffled" figure; reported beside it).
Each batch goes .to(device, non_blocking=True); the clock stops after torch.cuda.synchronize().
h5py files are opened lazily in each worker (h5py handles must not cross fork()).

The sweep (what an afternoon of tuning tries), bounded by --budget-seconds:
  0. the file is read once first (a warm page cache, as gpufeed-bench has);
  A. per-sample and sorted-batch at each --workers count (prefetch_factor 2, pin_memory,
     persistent_workers);
  B. at each mode's best worker count: prefetch_factor 4 and 8, pin_memory=False,
     persistent_workers=False;
  C. contiguous at the best sorted-batch configuration;
  then the best shuffled configuration again --repeats times: its median and range are the
  figure gpufeed-bench --peer compares against (the object with "best": true).
Warm-up per case: at least 2 x workers x prefetch_factor batches (--warmup at least), untimed.

  python3 bench/peers/pytorch_dataloader.py --file /tmp/gpufeed-bench-data/hdf5_r16384_n81920.h5 \\
      --json > torch.json
  python3 bench/peers/pytorch_dataloader.py --dry-run      # the sweep, without torch or h5py
Prints one JSON array (--json) with gpufeed-bench's fields; progress and a table on stderr.
Needs torch, h5py and numpy (not for --help or --dry-run).
"""

import argparse
import json
import os
import sys
import time

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


class Config:
    """One DataLoader configuration of the sweep."""

    def __init__(self, mode, workers, prefetch=2, pin=True, persistent=True):
        self.mode, self.workers, self.prefetch = mode, workers, prefetch if workers > 0 else 0
        self.pin, self.persistent = pin, persistent and workers > 0

    def key(self):
        return (self.mode, self.workers, self.prefetch, self.pin, self.persistent)

    def __str__(self):
        return (f"{self.mode} w{self.workers} pf{self.prefetch} pin={int(self.pin)} "
                f"persistent={int(self.persistent)}")

    def warmup(self, minimum):
        return max(minimum, 2 * self.workers * max(1, self.prefetch))


def stage_a(workers):
    out = [Config("per-sample", w) for w in workers if w > 0]
    return out + [Config("sorted-batch", w) for w in workers]


def stage_b(best):
    """Around one mode's best configuration: deeper prefetch, no pinning, no persistent workers."""
    w = best.workers
    out = [Config(best.mode, w, pf, True, True) for pf in (4, 8) if w > 0]
    out.append(Config(best.mode, w, best.prefetch or 2, False, best.persistent))
    if w > 0:
        out.append(Config(best.mode, w, best.prefetch or 2, best.pin, False))
    return out


def size_name(rec):
    return f"{rec >> 10}KiB" if rec % 1024 == 0 else f"{rec}B"


def warm_page_cache(path):
    t0, n = time.perf_counter(), 0
    with open(path, "rb", buffering=0) as f:
        while True:
            b = f.read(8 << 20)
            if not b:
                break
            n += len(b)
    return n, time.perf_counter() - t0


def make_runner(args, device):  # noqa: C901 (the torch side, imported only when measuring)
    import h5py
    import numpy as np
    import torch
    from torch.utils.data import DataLoader, Dataset, Sampler

    class H5Records(Dataset):
        """Rows of an (N, ...) HDF5 dataset; the file is opened on first use in each process.
        An int reads one row; a slice or a sorted index array reads a batch in one h5py call."""

        def __init__(self, path, dataset):
            self.path, self.dataset = path, dataset
            with h5py.File(path, "r") as f:
                d = f[dataset]
                self.n = int(d.shape[0])
                self.record_bytes = int(np.prod(d.shape[1:])) * d.dtype.itemsize
            self._data, self._pid = None, None

        def rows(self):
            if self._data is None or self._pid != os.getpid():
                self._data = h5py.File(self.path, "r")[self.dataset]
                self._pid = os.getpid()
            return self._data

        def __len__(self):
            return self.n

        def __getitem__(self, idx):
            return torch.from_numpy(np.ascontiguousarray(self.rows()[idx]))

    class SliceBatches(Sampler):
        """Contiguous batches [s, s + batch), in file order (drop_last)."""

        def __init__(self, n, batch):
            self.n, self.batch = n, batch

        def __iter__(self):
            for s in range(0, self.n - self.batch + 1, self.batch):
                yield slice(s, s + self.batch)

        def __len__(self):
            return self.n // self.batch

    class SortedRandomBatches(Sampler):
        """A new random permutation per epoch, cut into batches, each sorted (drop_last)."""

        def __init__(self, n, batch, seed):
            self.n, self.batch, self.epoch, self.seed = n, batch, 0, seed

        def __iter__(self):
            rng = np.random.default_rng(self.seed + self.epoch)
            self.epoch += 1
            perm = rng.permutation(self.n)
            for s in range(0, self.n - self.batch + 1, self.batch):
                yield np.sort(perm[s:s + self.batch])

        def __len__(self):
            return self.n // self.batch

    ds = H5Records(args.file, args.dataset)
    batch = args.batch or max(1, int(args.batch_mib * (1 << 20)) // ds.record_bytes)
    batch = min(batch, max(1, ds.n // 4))

    def verify():
        for i in sorted({0, ds.n // 2, ds.n - 1}):
            if ds[i].numpy().tobytes() != expected_record(i, ds.record_bytes):
                sys.exit(f"{args.file}: record {i} is not gpufeed-bench's data")
        idx = np.sort(np.random.default_rng(1).permutation(ds.n)[:4])
        got = ds[idx].numpy()
        for k, i in enumerate(idx):  # the batched read returns the rows in index order
            if got[k].tobytes() != expected_record(int(i), ds.record_bytes):
                sys.exit(f"{args.file}: batched read of record {i} differs from gpufeed-bench's data")

    def run(cfg):
        common = dict(num_workers=cfg.workers, pin_memory=cfg.pin and device.type == "cuda",
                      persistent_workers=cfg.persistent)
        if cfg.workers > 0:  # a worker that dies (e.g. /dev/shm full) raises within 60 s
            common.update(prefetch_factor=cfg.prefetch, timeout=60)
        if cfg.mode == "per-sample":
            loader = DataLoader(ds, batch_size=batch, shuffle=True, drop_last=True, **common)
        elif cfg.mode == "sorted-batch":
            loader = DataLoader(ds, sampler=SortedRandomBatches(ds.n, batch, 42), batch_size=None,
                                **common)
        else:
            loader = DataLoader(ds, sampler=SliceBatches(ds.n, batch), batch_size=None, **common)

        def forever():
            while True:
                yield from loader

        it = forever()
        warm = cfg.warmup(args.warmup)
        for _ in range(warm):
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
        size = size_name(ds.record_bytes)
        return {
            "case": f"pytorch/{cfg.mode}/{size}/w{cfg.workers}/pf{cfg.prefetch}"
                    f"/pin{int(cfg.pin)}/persist{int(cfg.persistent)}",
            "loader": "pytorch",
            "target": device.type,
            "dataset": f"hdf5/{size}",
            "format": "hdf5",
            "order": "sequential" if cfg.mode == "contiguous" else "shuffled",
            "record_bytes": ds.record_bytes,
            "workers": cfg.workers,
            "prefetch": cfg.prefetch,
            "streams": 0,
            "batch_size": batch,
            "batches": batches,
            "records": records,
            "bytes": nbytes,
            "seconds": seconds,
            "records_per_s": records / seconds,
            "gb_per_s": nbytes / seconds / 1e9,
            "stall_fraction": waited / seconds,
            "pinned_bytes": 0,
            "mode": cfg.mode,
            "pin_memory": cfg.pin,
            "persistent_workers": cfg.persistent,
            "warmup_batches": warm,
            "config": str(cfg),
            "torch": torch.__version__,
            "h5py": h5py.__version__,
            "file": os.path.abspath(args.file),
        }

    return ds, verify, run


def median_of(results):
    """The median run by GB/s (lower middle for an even count) with every run's figure."""
    by = sorted(results, key=lambda r: r["gb_per_s"])
    gb = sorted(r["gb_per_s"] for r in results)
    rps = sorted(r["records_per_s"] for r in results)
    mid = len(by) // 2

    def med(v):
        return v[mid] if len(v) % 2 else 0.5 * (v[mid - 1] + v[mid])

    best = dict(by[(len(by) - 1) // 2])
    best.update(case="pytorch/best/" + best["case"][len("pytorch/"):], best=True,
                repeats=len(results), repeat_gb_per_s=[r["gb_per_s"] for r in results],
                median_gb_per_s=med(gb), min_gb_per_s=gb[0], max_gb_per_s=gb[-1],
                median_records_per_s=med(rps))
    return best


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n".join(__doc__.split("\n")[2:]))
    ap.add_argument("--file", help="HDF5 file written by gpufeed-bench (hdf5_r16384_n*.h5)")
    ap.add_argument("--dataset", default="data")
    ap.add_argument("--batch", type=int, default=0, help="records per batch (default: --batch-mib)")
    ap.add_argument("--batch-mib", type=float, default=8.0)
    ap.add_argument("--workers", default="0,4,8,16",
                    help="num_workers values of stage A (capped at the CPU count; 0: in-process, "
                         "sorted-batch only)")
    ap.add_argument("--seconds", type=float, default=2.0, help="timed seconds per case")
    ap.add_argument("--min-batches", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=3,
                    help="untimed batches per case, at least (and at least 2 x workers x prefetch)")
    ap.add_argument("--repeats", type=int, default=3, help="runs of the best configuration")
    ap.add_argument("--budget-seconds", type=float, default=180.0,
                    help="the whole sweep's time limit (cases that would pass it are skipped)")
    ap.add_argument("--device", default=None, help="default: cuda when available, else cpu")
    ap.add_argument("--json", action="store_true", help="print a JSON array on stdout")
    ap.add_argument("--dry-run", action="store_true", help="list the sweep and exit (no torch)")
    ap.add_argument("--no-verify", action="store_true",
                    help="skip checking that the file holds gpufeed-bench's records")
    args = ap.parse_args()

    cpus = os.cpu_count() or 1
    workers = sorted({min(int(w), cpus) for w in args.workers.split(",") if w.strip()})
    if args.dry_run:
        print("stage 0: read the file once (warm page cache)")
        for c in stage_a(workers):
            print(f"stage A: {c}  (warm-up {c.warmup(args.warmup)} batches, {args.seconds} s)")
        for mode in ("per-sample", "sorted-batch"):
            w = workers[-1] if mode == "sorted-batch" or workers[-1] > 0 else 1
            for c in stage_b(Config(mode, w)):
                print(f"stage B (at {mode}'s best workers, e.g. w{w}): {c}")
        print("stage C: contiguous at the best sorted-batch configuration")
        print(f"then the best shuffled configuration {args.repeats} more times: median and range")
        print(f"budget: {args.budget_seconds} s")
        return
    if not args.file:
        ap.error("--file is required (except with --dry-run)")

    import torch
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    ds, verify, run = make_runner(args, device)
    t_start = time.perf_counter()
    nbytes, secs = warm_page_cache(args.file)
    print(f"read {args.file} once ({nbytes / 2**30:.2f} GiB in {secs:.1f} s) to warm the page cache",
          file=sys.stderr)
    if not args.no_verify:
        verify()
    results, measured, slowest = [], {}, [args.seconds + 2.0]

    def left():
        return args.budget_seconds - (time.perf_counter() - t_start)

    reserve = lambda: args.repeats * max(slowest)  # noqa: E731 (time kept for the repeats)

    def measure(cfg):
        if cfg.key() in measured:
            return measured[cfg.key()]
        if left() - reserve() < max(slowest):
            print(f"{str(cfg):<50} skipped: the time budget is spent", file=sys.stderr)
            return None
        t0 = time.perf_counter()
        try:
            r = run(cfg)
        except Exception as e:  # noqa: BLE001 (a failed configuration is a result, not the end)
            print(f"{str(cfg):<50} failed: {type(e).__name__}: {e}", file=sys.stderr)
            results.append({"case": f"pytorch/failed/{cfg.mode}/w{cfg.workers}/pf{cfg.prefetch}",
                            "loader": "pytorch", "config": str(cfg), "error": f"{e}"})
            slowest.append(time.perf_counter() - t0)
            return None
        slowest.append(time.perf_counter() - t0)
        measured[cfg.key()] = (cfg, r)
        results.append(r)
        print(f"{str(cfg):<50} {r['records_per_s']:>10.0f} records/s {r['gb_per_s']:>8.3f} GB/s"
              f"  stall {r['stall_fraction']:.2f}  batch {r['batch_size']}  warm-up "
              f"{r['warmup_batches']}", file=sys.stderr)
        return cfg, r

    def best(mode=None):
        c = [(cfg, r) for cfg, r in measured.values()
             if r["order"] == "shuffled" and (mode is None or cfg.mode == mode)]
        return max(c, key=lambda x: x[1]["gb_per_s"]) if c else None

    for cfg in stage_a(workers):
        measure(cfg)
    for mode in ("per-sample", "sorted-batch"):
        b = best(mode)
        if b:
            for cfg in stage_b(b[0]):
                measure(cfg)
    b = best("sorted-batch")
    if b:
        c = b[0]
        measure(Config("contiguous", c.workers, c.prefetch, c.pin, c.persistent))
    top = best()
    if top:
        cfg = top[0]
        reps = []
        for _ in range(max(1, args.repeats)):
            if reps and left() < max(slowest):
                print("repeats cut short: the time budget is spent", file=sys.stderr)
                break
            try:
                reps.append(run(cfg))
            except Exception as e:  # noqa: BLE001
                print(f"repeat of {cfg} failed: {type(e).__name__}: {e}", file=sys.stderr)
        if not reps:
            reps = [top[1]]  # the sweep's own run, when every repeat failed
        med = median_of(reps)
        results.append(med)
        print(f"best shuffled: {cfg}: median {med['median_gb_per_s']:.3f} GB/s "
              f"[{med['min_gb_per_s']:.3f}-{med['max_gb_per_s']:.3f}] of {len(reps)} runs, "
              f"{med['median_records_per_s']:.0f} records/s; sweep took "
              f"{time.perf_counter() - t_start:.0f} s", file=sys.stderr)
    if args.json:
        json.dump(results, sys.stdout, indent=1)
        print()


if __name__ == "__main__":
    main()
