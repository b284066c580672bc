#!/usr/bin/env bash
# 1 MiB records, streams 2: (batch MiB : prefetch) pairs giving pinned rings of 64-256 MiB,
# two rounds, cases alternating.
set -u
cd "${BUNDLE:-$(dirname "$0")}"; export LD_LIBRARY_PATH=$PWD/lib
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; d=/dev/shm/gb; mkdir -p $d
common=(--data-dir $d --record-sizes 1048576 --formats hdf5 --workers 14 --repeats 1 --case-seconds 3 --dataset-mib 3072 --skip naive,overlap,first-batch,epochs)
./bin/gpufeed-bench "${common[@]}" --prepare-only > "$OUT/prep.txt" 2>&1
cases="64:2 64:4 16:16 16:4 32:2 8:8"
for r in 1 2; do for c in $cases; do b=${c%:*}; p=${c#*:}
  ./bin/gpufeed-bench "${common[@]}" --batch-mib $b --streams 2 --prefetch $p --json > "$OUT/r$r-b$b-p$p.json" 2> "$OUT/r$r-b$b-p$p.err"
done; done
