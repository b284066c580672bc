#!/usr/bin/env bash
# Device run: GPU tests, GPU decode bench, then old/new loader A/B on small records.
set -u
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=$PWD/lib
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,pcie.link.gen.current,pcie.link.width.current --format=csv > "$OUT/gpu.txt" 2>&1
echo "== GPU tests"; bash ./gpu-run.sh 2>&1 | tail -16 | tee "$OUT/tests_table.txt"
echo "== gpu_decode_bench"; ./bin/gpu_decode_bench --mib 512 --reps 10 > "$OUT/gpu_decode_bench.txt" 2>&1; tail -25 "$OUT/gpu_decode_bench.txt"
python3 - <<'PY'
import h5py, numpy as np
rng = np.random.default_rng(1)
for name, n, w in (("r256", 4 << 20, 256), ("r4k", 256 << 10, 4096)):
    with h5py.File(f"/dev/shm/{name}.h5", "w") as f:
        f.create_dataset("data", data=rng.integers(0, 255, (n, w), dtype=np.uint8))
PY
ls -la /dev/shm/*.h5 >> "$OUT/gpu.txt"
for f in r256 r4k; do for o in sequential block_shuffled shuffled; do for v in old new; do
  ./bin/gpufeed-$v bench /dev/shm/$f.h5 --order $o --workers 14 --prefetch 4 --seconds 8 --json > "$OUT/$f-$o-$v.json" 2> "$OUT/$f-$o-$v.err"
done; done; done
python3 - "$OUT" <<'PY'
import json, sys, os
out = sys.argv[1]
def rate(p):
    try: j = json.load(open(p))
    except Exception as e: return None
    best = None
    for r in j.get("loader", []):
        g = r.get("gbps", 0)
        rec = r.get("records_per_s", 0)
        if best is None or g > best[0]: best = (g, rec)
    return best
print(f"{'file':6} {'order':15} {'old GB/s':>9} {'new GB/s':>9} {'old Mrec/s':>10} {'new Mrec/s':>10} {'new/old':>7}")
for f in ("r256", "r4k"):
    for o in ("sequential", "block_shuffled", "shuffled"):
        a = rate(f"{out}/{f}-{o}-old.json"); b = rate(f"{out}/{f}-{o}-new.json")
        if not a or not b: print(f, o, "missing", a, b); continue
        print(f"{f:6} {o:15} {a[0]:9.2f} {b[0]:9.2f} {a[1]/1e6:10.2f} {b[1]/1e6:10.2f} {b[0]/max(a[0],1e-9):7.2f}")
PY
