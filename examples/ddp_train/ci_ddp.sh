#!/usr/bin/env bash
# CI for ddp_train on the host target (ctest ddp_train_mpi): ci_ddp.sh DDP_TRAIN MPIEXEC WORKDIR
#  1. one process without mpirun, then mpirun -np 2 and -np 3, global batch 24: every run's
#     --check passes (equal batch counts, every record exactly once per epoch, bitwise identical
#     weights), the loss falls, and the 2- and 3-rank loss curves equal the 1-rank one to float
#     tolerance (the same global batches in the same order);
#  2. 2,401 records on 3 ranks: the union of each epoch is still the dataset (a few repeats);
#  3. elastic resume: 4 ranks stop after 130 steps (mid epoch 1) and checkpoint; resumed on 2
#     and on 3 ranks, epoch 1 (before + after the resume) delivers every record exactly once and
#     epoch 2's loss equals the uninterrupted 1-rank run's;
#  4. the checks can fail: ranks that share one partition, and one rank's weights off by one ulp,
#     make ddp_train exit non-zero naming the failed check; a truncated or foreign checkpoint is
#     a corrupt_error / format_error naming the file.
# About 10 s: 2,400 records of 128 bytes, 3 epochs of 100 steps.
set -euo pipefail
bin=$1 mpiexec=$2 work=$3
rm -rf "$work"
mkdir -p "$work"
cd "$work"
# Containers often forbid the cross-memory attach Open MPI's shared-memory transport uses.
export OMPI_MCA_btl_vader_single_copy_mechanism=none
mpi() { local n=$1; shift; "$mpiexec" --allow-run-as-root --oversubscribe -np "$n" "$bin" "$@"; }
base=(--data data --records 2400 --global-batch 24 --check --target host --workers 2)
common=("${base[@]}" --epochs 3)
fail() { echo "FAIL: $*"; exit 1; }

echo "== 1 process, no mpirun"
"$bin" "${common[@]}" --loss-log loss1.txt | tee run1.log
for n in 2 3; do
  echo "== mpirun -np $n"
  mpi "$n" "${common[@]}" --loss-log "loss$n.txt" | tee "run$n.log"
done
for n in 1 2 3; do
  [ "$(grep -c 'every record exactly once' "run$n.log")" -eq 3 ] || fail "run $n: not 3 exact epochs"
  grep -q "parameters bitwise identical on all $n ranks" "run$n.log" || fail "run $n: weights"
done
# The loss falls: the last epoch's is below 90% of the first's.
awk 'NR == 1 { first = $2 } END { if (!($2 < 0.9 * first)) exit 1 }' loss1.txt ||
  fail "the loss did not fall: $(cat loss1.txt)"
# same_loss A B [FROM_EPOCH]: B's whole epochs (from FROM_EPOCH) within 1e-4 (relative) of A's.
same_loss() {
  awk -v from="${3:-0}" 'NR == FNR { if ($1 != "#") a[$1] = $2; next }
       $1 != "#" && $1 >= from { n++; d = $2 - a[$1]; if (d < 0) d = -d;
         if (!($1 in a) || d > 1e-4 * a[$1]) { print "epoch " $1 ": " a[$1] " vs " $2; bad = 1 } }
       END { exit bad || n == 0 }' "$1" "$2"
}
for n in 2 3; do
  same_loss loss1.txt "loss$n.txt" || fail "$n ranks' loss differs from 1 rank's (same global batch)"
done

echo "== 2401 records on 3 ranks"
mpi 3 --data data2401 --records 2401 --global-batch 24 --epochs 2 --check --target host \
  --workers 2 | tee uneven.log
[ "$(grep -c 'the union is the dataset' uneven.log)" -eq 2 ] || fail "2401 records: union"

echo "== elastic resume: 4 ranks for 130 steps, then 2 and 3"
mpi 4 "${common[@]}" --steps 130 --checkpoint ckpt.bin | tee stop4.log
grep -q "checkpoint after 130 steps (epoch 1" stop4.log || fail "no checkpoint in epoch 1"
for n in 2 3; do
  mpi "$n" "${common[@]}" --resume ckpt.bin --loss-log "resume$n.txt" | tee "resume$n.log"
  grep -q "epoch 1: .*(720 before the resume).*every record exactly once" "resume$n.log" ||
    fail "resume on $n: epoch 1 not exactly once across the resume"
  grep -q "epoch 2: .*every record exactly once" "resume$n.log" || fail "resume on $n: epoch 2"
  same_loss loss1.txt "resume$n.txt" 2 || fail "resume on $n: epoch 2's loss differs from 1 rank's"
done

echo "== the checks fail when they should"
for fault in overlap diverge; do
  if mpi 2 "${base[@]}" --epochs 1 --fault "$fault" >"fault-$fault.log" 2>&1; then
    cat "fault-$fault.log"; fail "--fault $fault: ddp_train passed"
  fi
  cat "fault-$fault.log"
done
grep -q "NOT every record exactly once" fault-overlap.log || fail "overlap not reported"
grep -q "parameters DIFFER from rank 0's on rank(s) 1" fault-diverge.log || fail "diverge not reported"
echo "== bad checkpoints: typed errors naming the file"
"$bin" "${base[@]}" --epochs 1 --steps 5 --checkpoint five.bin >/dev/null
head -c 60 five.bin >cut.bin
head -c 100 /dev/zero >zero.bin
for f in cut zero; do
  if "$bin" "${base[@]}" --epochs 1 --resume "$f.bin" >"resume-$f.log" 2>&1; then
    fail "resumed from $f.bin"
  fi
  cat "resume-$f.log"
done
grep -q "checkpoint is truncated \[file 'cut.bin'\]" resume-cut.log || fail "cut.bin: no corrupt_error"
grep -q "not a ddp_train checkpoint.*\[file 'zero.bin'\]" resume-zero.log || fail "zero.bin: no format_error"
echo "ddp_train CI: all passed"
