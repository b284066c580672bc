#!/usr/bin/env bash
# 1 MiB records, batches of 64 and 16 MiB alternating (3 rounds), streams 2, prefetch 4.
set -u
cd "${BUNDLE:-$(dirname "$0")}"; export LD_LIBRARY_PATH=$PWD/lib
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; d=/dev/shm/gb; mkdir -p $d
common=(--data-dir $d --record-sizes 1048576 --formats hdf5 --workers 14 --repeats 1 --case-seconds 3 --dataset-mib 3072 --skip naive,overlap,first-batch,epochs)
./bin/gpufeed-bench "${common[@]}" --prepare-only > "$OUT/prep.txt" 2>&1
for r in 1 2 3; do for b in 64 16; do
  ./bin/gpufeed-bench "${common[@]}" --batch-mib $b --streams 2 --prefetch 4 --json > "$OUT/r$r-b$b.json" 2> "$OUT/r$r-b$b.err"
done; done
