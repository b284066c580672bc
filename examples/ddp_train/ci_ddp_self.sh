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
# Checkpoints whose array lengths lie (128 bytes declaring 2^32 parameters; 2^32 - 1 delivered
# records): a corrupt_error naming file and field at once, before anything is allocated for them.
bomb() {  # FILE PARAMETERS DELIVERED: the header, the five counters, the two lengths, zeros
  python3 -c 'import struct, sys
head = b"gpufeed-ddp-v1".ljust(16, b"\0") + struct.pack("<5Q", 5, 1, 120, 600, 30)
body = struct.pack("<Q", int(sys.argv[2])) if sys.argv[2] != "0" else struct.pack("<QQ", 0, int(sys.argv[3]))
open(sys.argv[1], "wb").write((head + body).ljust(128, b"\0"))' "$@"
}
bomb parameters.bin 4294967296 0
bomb delivered.bin 0 4294967295
for f in parameters delivered; do
  if timeout 30 "$bin" "${base[@]}" --resume "$f.bin" >"resume-$f.log" 2>&1; then
    fail "resumed from $f.bin"
  fi
  cat "resume-$f.log"
  grep -q "checkpoint is truncated: its field '$f.*\[file '$f.bin'\]" "resume-$f.log" ||
    fail "$f.bin: no corrupt_error naming the field"
done
echo "ddp_train (one process) CI: all passed"
