#!/usr/bin/env bash
# CI for ddp_train as one process without MPI (--comm self), so the sanitizer reruns cover the
# program's own code (ctest ddp_train_self; the MPI runs are ddp_train_mpi, nosan):
#   ci_ddp_self.sh DDP_TRAIN WORKDIR
# 600 records, global batch 24: 2 epochs straight, then 30 steps + checkpoint + resume, all
# with --check (every record exactly once per epoch, across the resume too). A few seconds.
set -euo pipefail
bin=$1 work=$2
rm -rf "$work"
mkdir -p "$work"
cd "$work"
base=(--comm self --data data --records 600 --global-batch 24 --epochs 2 --check --target host --workers 2)
fail() { echo "FAIL: $*"; exit 1; }
"$bin" "${base[@]}" | tee straight.log
[ "$(grep -c "every record exactly once" straight.log)" -eq 2 ] || fail "2 exact epochs"
"$bin" "${base[@]}" --steps 30 --checkpoint ckpt.bin | tee stop.log
grep -q "checkpoint after 30 steps (epoch 1, position 120)" stop.log || fail "no checkpoint at position 120"
"$bin" "${base[@]}" --resume ckpt.bin --loss-log resumed.txt | tee resumed.log
grep -q "epoch 1: .*(120 before the resume).*every record exactly once" resumed.log ||
  fail "epoch 1 not exactly once across the resume"
echo "ddp_train (one process) CI: all passed"
