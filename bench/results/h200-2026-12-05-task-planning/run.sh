#!/usr/bin/env bash
# Device run: GPU tests of the new build, then old/new loader A/B (old = before worker tasks
# filled their own records and before readers kept their last shard pinned) on uncompressed
# 256 B, 4 KiB and 16 KiB records in every order, and 1 MiB records. Run from the bundle folder (bin/, lib/, gpu-run.sh).
set -u
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=$PWD/lib
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,pcie.link.gen.current,pcie.link.width.current --format=csv > "$OUT/gpu.txt" 2>&1
echo "== GPU tests"; bash ./gpu-run.sh 2>&1 | tail -14 | tee "$OUT/tests_table.txt"
python3 - <<'PY'
import h5py, numpy as np, os
shrink = int(os.environ.get("SHRINK", "0"))  # a dry run of the script writes smaller files
rng = np.random.default_rng(1)
for name, n, w in (("r256", 4 << 20, 256), ("r4k", 256 << 10, 4096), ("r16k", 64 << 10, 16384),
                   ("r1m", 1 << 10, 1 << 20)):
    with h5py.File(f"/dev/shm/{name}.h5", "w") as f:
        f.create_dataset("data", data=rng.integers(0, 255, (n >> shrink, w), dtype=np.uint8))
PY
ls -la /dev/shm/*.h5 >> "$OUT/gpu.txt"
runs=()
for f in r256 r4k r16k; do for o in sequential block_shuffled shuffled; do runs+=("$f $o"); done; done
runs+=("r1m shuffled" "r1m sequential")
for r in "${runs[@]}"; do set -- $r; for v in old new; do
  ./bin/gpufeed-$v bench /dev/shm/$1.h5 --order $2 --workers 14 --prefetch 4 --seconds ${SECONDS_EACH:-4} --json > "$OUT/$1-$2-$v.json" 2> "$OUT/$1-$2-$v.err"
done; done
python3 - "$OUT" <<'PY' | tee "$OUT/table.txt"
import json, sys
out = sys.argv[1]
def row(p):
    try: j = json.load(open(p))
    except Exception: return None
    best = max(j.get("loader", []), key=lambda r: r.get("gbps", 0), default=None)
    return best and (best["gbps"], best["records_per_s"], best.get("workers_busy_fraction", 0), j.get("h2d", {}))
print(f"{'file':6} {'order':15} {'old GB/s':>8} {'new GB/s':>8} {'old Mrec/s':>10} {'new Mrec/s':>10} {'new/old':>7} {'busy old/new':>12}")
for f in ("r256", "r4k", "r16k", "r1m"):
    for o in ("sequential", "block_shuffled", "shuffled"):
        a = row(f"{out}/{f}-{o}-old.json"); b = row(f"{out}/{f}-{o}-new.json")
        if not a or not b:
            if f != "r1m" or o != "block_shuffled": print(f, o, "missing")
            continue
        print(f"{f:6} {o:15} {a[0]:8.2f} {b[0]:8.2f} {a[1]/1e6:10.2f} {b[1]/1e6:10.2f} {b[0]/max(a[0],1e-9):7.2f} {a[2]:5.2f}/{b[2]:5.2f}")
j = json.load(open(f"{out}/r16k-shuffled-new.json"))
print("pinned H2D:", j.get("h2d"))
PY
