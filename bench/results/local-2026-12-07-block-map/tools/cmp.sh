#!/bin/bash
# usage: cmp.sh OUTDIR ROUNDS WORKERS BIN...   alternates binaries round by round, JSON per run
out=$1; rounds=$2; workers=$3; shift 3
mkdir -p $out
for r in $(seq 1 $rounds); do
  for b in "$@"; do
    /tmp/bm-bench-$b --target host --formats hdf5 --orders shuffled,block_shuffled --record-sizes 256,16384 \
      --workers $workers --prefetch 4 --repeats 1 --case-seconds 1 --skip limits,naive,overlap,first-batch,epochs \
      --dataset-mib 128 --data-dir /tmp/bm-data --json > $out/$b-w$workers-r$r.json 2>/dev/null
  done
done
