#!/usr/bin/env bash
# GPU tests of the final build, then 1 MiB records with the final automatic prefetch.
set -u
cd "${BUNDLE:-$(dirname "$0")}"; export LD_LIBRARY_PATH=$PWD/lib
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; d=/dev/shm/gb; mkdir -p $d
bash ./gpu-run.sh  # scripts/gpu-run.sh, copied into the bundle > "$OUT/gpu_tests.txt" 2>&1; tail -13 "$OUT/gpu_tests.txt"
common=(--data-dir $d --record-sizes 1048576 --formats hdf5 --workers 14 --repeats 1 --case-seconds 3 --dataset-mib 3072 --skip naive,overlap,first-batch,epochs --streams 2 --prefetch 0)
./bin/gpufeed-bench "${common[@]}" --prepare-only > "$OUT/prep.txt" 2>&1
for b in 64 32 16; do ./bin/gpufeed-bench "${common[@]}" --batch-mib $b --json > "$OUT/final-b$b.json" 2> "$OUT/final-b$b.err"; done
python3 - "$OUT" <<'PY' | tee "$OUT/final_table.txt"
import json, sys
for b in (64, 32, 16):
    rs = json.load(open(f"{sys.argv[1]}/final-b{b}.json"))
    lim = {r['case']: r['gb_per_s'] for r in rs if r['loader'].startswith('limit')}
    for r in rs:
        if r['loader'] == 'gpufeed':
            print(f"batch {b} MiB prefetch {r['prefetch']} ring {r['pinned_bytes']/2**20:.0f} MiB {r['gb_per_s']:.2f} GB/s copy {r.get('h2d_copy_gb_per_s',0):.2f} | pinned h2d 16/256 MiB {lim.get('limit/pinned_h2d/16MiB',0):.1f}/{lim.get('limit/pinned_h2d/256MiB',0):.1f} -> {r['gb_per_s']/max(lim.get('limit/pinned_h2d/256MiB',1),1e-9):.2f}x")
PY
