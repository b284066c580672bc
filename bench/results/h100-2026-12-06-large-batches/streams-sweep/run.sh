#!/usr/bin/env bash
# 1 MiB records: batches of 8, 16, 64 MiB x streams 1, 2, 4 x prefetch 4, 8 (gpufeed-bench
# sweeps the prefetch list). Run from a bundle folder holding bin/gpufeed-bench and lib/.
set -u
cd "${BUNDLE:-$(dirname "$0")}"; export LD_LIBRARY_PATH=$PWD/lib
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; d=/dev/shm/gb; mkdir -p $d
common=(--data-dir $d --record-sizes 1048576 --formats hdf5 --workers 14 --repeats 1 --case-seconds 3 --dataset-mib 3072 --skip naive,overlap,first-batch,epochs)
./bin/gpufeed-bench "${common[@]}" --prepare-only > "$OUT/prep.txt" 2>&1
for b in 8 16 64; do for s in 1 2 4; do
  ./bin/gpufeed-bench "${common[@]}" --batch-mib $b --streams $s --prefetch 4,8 --json > "$OUT/b$b-s$s.json" 2> "$OUT/b$b-s$s.err"
done; done
