#!/usr/bin/env bash
# 1 MiB records, streams 2, automatic prefetch (--prefetch 0): bin/gpufeed-bench-old (default 8)
# against bin/gpufeed-bench-new (the first version of auto_prefetch, a ring of max(64 MiB, a
# quarter of the last-level cache)), and the new program at a set neighbouring depth; two rounds.
set -u
cd "${BUNDLE:-$(dirname "$0")}"; export LD_LIBRARY_PATH=$PWD/lib
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; d=/dev/shm/gb; mkdir -p $d
nvidia-smi --query-gpu=name,pcie.link.gen.current,pcie.link.width.current --format=csv > "$OUT/gpu.txt" 2>&1
lscpu | grep -E 'Model name|L3' >> "$OUT/gpu.txt"
common=(--data-dir $d --record-sizes 1048576 --formats hdf5 --workers 14 --repeats 1 --case-seconds 3 --dataset-mib 3072 --skip naive,overlap,first-batch,epochs,limits --streams 2)
./bin/gpufeed-bench-new "${common[@]}" --prepare-only > "$OUT/prep.txt" 2>&1
cases="64:old:0 64:new:0 64:new:3 32:old:0 32:new:0 32:new:3 16:old:0 16:new:0 16:new:6 8:old:0 8:new:0"
for r in 1 2; do for c in $cases; do IFS=: read b v p <<< "$c"
  ./bin/gpufeed-bench-$v "${common[@]}" --batch-mib $b --prefetch $p --json > "$OUT/r$r-b$b-$v-p$p.json" 2> "$OUT/r$r-b$b-$v-p$p.err"
done; done
