#!/usr/bin/env python3
"""Plots gpufeed-bench results (PNG): throughput against workers, and an overlap timeline.

  python3 bench/plot.py bench.json [torch.json ...] [--trace overlap-trace.json] [--out-dir DIR]

bench.json: `gpufeed-bench --json` output; torch.json: bench/peers/pytorch_dataloader.py --json.
Writes DIR/throughput_vs_workers.png: one panel per record size, GB/s (log scale) against worker
threads — gpufeed (best prefetch depth at each worker count) per data set, the raw parallel pread
and LMDB rates at the same thread counts, the naive loader, PyTorch, and the pinned H2D peak.
With --trace (gpufeed-bench --trace FILE), DIR/overlap_timeline.png: a window of steady-state
batches of that run, one row per track (workers, planner, consumer, H2D streams, model).
Needs matplotlib.
"""

import argparse
import collections
import json
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

COLORS = {"hdf5": "tab:blue", "hdf5-deflate": "tab:cyan", "lmdb": "tab:green",
          "pytorch": "tab:red", "naive": "black", "h2d": "tab:purple"}


def size_name(n):
    return f"{n >> 20} MiB" if n % (1 << 20) == 0 else f"{n >> 10} KiB" if n % 1024 == 0 else f"{n} B"


def load(paths):
    rows = []
    for p in paths:
        with open(p) as f:
            j = json.load(f)
        if isinstance(j, dict):  # bench/run_h200.sh's h200.json: each program's array
            for key in ("gpufeed_bench", "pytorch"):
                rows.extend(j.get(key) if isinstance(j.get(key), list) else [])
        else:
            rows.extend(j)
    return rows


def throughput_plot(rows, out):
    info = next((r for r in rows if r.get("loader") == "info"), {})
    rows = [r for r in rows if "error" not in r]  # the PyTorch sweep's failed configurations
    sizes = sorted({r["record_bytes"] for r in rows
                    if r.get("loader") in ("gpufeed", "pytorch") and r["case"].split("/")[0]
                    in ("gpufeed", "pytorch")})
    if not sizes:
        print("no gpufeed or pytorch cases to plot")
        return
    fig, axes = plt.subplots(1, len(sizes), figsize=(6 * len(sizes), 4.8), squeeze=False)
    h2d = max((r["gb_per_s"] for r in rows if r.get("loader") == "limit:pinned_h2d"), default=0)
    for ax, rec in zip(axes[0], sizes):
        series = collections.defaultdict(dict)  # label -> workers -> GB/s (best over prefetch)
        style = {}
        for r in rows:
            if r.get("record_bytes") != rec:
                continue
            kind = r["case"].split("/")[0]
            if r["loader"] == "gpufeed" and kind == "gpufeed":
                aligned = "/seq-aligned/" in r["case"]
                label = f"gpufeed {r['format']} ({r['order']}{', chunk-aligned tasks' if aligned else ''})"
                style[label] = (COLORS.get(r["format"], "gray"), "-." if aligned else "-", "o")
            elif r["loader"] == "limit:pread":
                label = "pread limit (hdf5 file)"
                style[label] = (COLORS["hdf5"], "--", "")
            elif r["loader"] == "limit:lmdb_raw":
                label = "raw LMDB limit"
                style[label] = (COLORS["lmdb"], "--", "")
            elif r["loader"] == "naive" and r.get("variant") == "per_batch" and not r.get("compute_ms"):
                label = "naive: read a batch, one pageable cudaMemcpy (per thread)"
                style[label] = (COLORS["naive"], "-", "^")
            elif r["loader"] == "pytorch" and not r.get("best"):
                label = f"PyTorch DataLoader+h5py ({r.get('mode', r['order'])})"
                style[label] = (COLORS["pytorch"], "-" if r["order"] == "shuffled" else ":", "s")
            else:
                continue
            w = r["workers"]
            series[label][w] = max(series[label].get(w, 0), r.get("median_gb_per_s", r["gb_per_s"]))
        ticks = set()
        for label, pts in sorted(series.items()):
            xs = sorted(pts)
            ticks.update(xs)
            color, ls, marker = style[label]
            ax.plot(xs, [pts[x] for x in xs], ls, color=color, marker=marker or None, label=label)
        naive = [r.get("median_gb_per_s", r["gb_per_s"]) for r in rows if r.get("loader") == "naive"
                 and r.get("record_bytes") == rec and not r.get("compute_ms")
                 and r.get("variant", "per_record") == "per_record"]
        if naive:
            ax.axhline(max(naive), color=COLORS["naive"], ls=":",
                       label="naive: per record, pageable cudaMemcpy (1 thread)")
        if h2d:
            ax.axhline(h2d, color=COLORS["h2d"], ls="-.", label="pinned H2D peak")
        ax.set_yscale("log")
        ax.set_xticks(sorted(ticks))
        ax.set_xlabel("worker threads (PyTorch: num_workers)")
        ax.set_ylabel("GB/s (record bytes delivered)")
        ax.set_title(f"{size_name(rec)} records")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(f"gpufeed-bench, target {info.get('target', '?')}, page cache — "
                 f"{info.get('date', '')}\n{info.get('machine', '')}", fontsize=9)
    fig.tight_layout()
    fig.savefig(out, dpi=130)
    print(f"wrote {out}")


EVENT_COLORS = {"read": "tab:blue", "plan": "tab:gray", "wait for slot": "lightgray",
                "wait for batch": "tab:red", "consume": "tab:green", "H2D copy": "tab:orange",
                "model": "tab:purple"}


def timeline_plot(trace_path, out, from_batch, batches):
    with open(trace_path) as f:
        events = json.load(f)["traceEvents"]
    names = {e["tid"]: e["args"]["name"] for e in events if e.get("name") == "thread_name"}
    spans = [e for e in events if e.get("ph") == "X"]
    waits = sorted((e for e in spans if e["name"] == "wait for batch"), key=lambda e: e["ts"])
    if len(waits) < 2:
        print(f"{trace_path}: too few batches to plot")
        return
    k0 = min(from_batch, len(waits) - 2)
    k1 = min(k0 + batches, len(waits) - 1)
    t0, t1 = waits[k0]["ts"], waits[k1]["ts"] + waits[k1]["dur"]
    tids = sorted(names)
    fig, ax = plt.subplots(figsize=(12, 0.45 * len(tids) + 1.5))
    seen = set()
    for row, tid in enumerate(reversed(tids)):
        for e in spans:
            if e["tid"] != tid or e["ts"] + e["dur"] < t0 or e["ts"] > t1:
                continue
            name = e["name"]
            ax.broken_barh([((e["ts"] - t0) / 1e3, max(e["dur"], 0.5) / 1e3)], (row - 0.4, 0.8),
                           color=EVENT_COLORS.get(name, "black"),
                           label=None if name in seen else name)
            seen.add(name)
    ax.set_yticks(range(len(tids)))
    ax.set_yticklabels([names[t] for t in reversed(tids)], fontsize=8)
    ax.set_xlim(0, (t1 - t0) / 1e3)
    ax.set_xlabel(f"ms (batches {k0}..{k1} of the run)")
    ax.set_title(f"overlap timeline: {os.path.basename(trace_path)}", fontsize=10)
    ax.legend(loc="upper right", fontsize=7, ncol=4)
    fig.tight_layout()
    fig.savefig(out, dpi=130)
    print(f"wrote {out}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("results", nargs="*", help="JSON arrays from gpufeed-bench / the peers")
    ap.add_argument("--trace", help="Chrome trace written by gpufeed-bench --trace")
    ap.add_argument("--out-dir", default=".")
    ap.add_argument("--from-batch", type=int, default=20, help="first batch of the timeline")
    ap.add_argument("--batches", type=int, default=8, help="batches in the timeline window")
    args = ap.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    if args.results:
        throughput_plot(load(args.results), os.path.join(args.out_dir, "throughput_vs_workers.png"))
    if args.trace:
        timeline_plot(args.trace, os.path.join(args.out_dir, "overlap_timeline.png"),
                      args.from_batch, args.batches)


if __name__ == "__main__":
    main()
