#!/usr/bin/env bash
# On the GPU machine, after scripts/ddp-bundle.sh here and with its bundle folder carried, from
# that folder's copy of this script:
#   bash gpu-ddp.sh        one GPU: correctness, then samples/s beside train_loop's
#   bash gpu-ddp.sh N      N GPUs of one host (scripts/multi-gpu.sh): mpirun -np N
# Logs and loss curves are written to /tmp/gpufeed-ddp and gathered into one file,
# $OUT/gpu-ddp.log (the device tool returns few files); a summary is printed last and the exit
# status is 1 if any check failed.
set -u
here=$(cd "$(dirname "$0")" && pwd)
gpus=${1:-1}
out=/tmp/gpufeed-ddp
rm -rf "$out"
mkdir -p "$out" "${OUT:-/tmp/gpufeed-out}"
export LD_LIBRARY_PATH=$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
source "$here/gpu-libs.sh" || exit 1
source "$here/gpu-mpi.sh"  # the bundled Open MPI; NVLink multicast off
bin=$here/bin
small=(--data /tmp/ddp-small --records 2400 --global-batch 24 --epochs 3 --check --workers 2)
records=${DDP_RECORDS:-100000}  # the throughput runs' dataset (16 KiB records)
big=(--data /tmp/ddp-big-$records --records "$records" --features 4096 --hidden 256 --classes 10
     --global-batch 512 --epochs 3 --workers 14)
status=0 summary=""
note() { summary+="$1"$'\n'; echo "== $1"; }
run() {  # run NAME COMMAND...: output to $out/NAME.log (and the screen)
  local name=$1; shift
  "$@" 2>&1 | tee "$out/$name.log"
  local rc=${PIPESTATUS[0]}
  [ "$rc" -eq 0 ] || { status=1; note "$name: FAILED (exit $rc)"; }
  return "$rc"
}
same_loss() {  # same_loss A B TOL: whole-epoch losses of B within TOL (relative) of A's
  awk -v tol="$3" 'NR == FNR { if ($1 != "#") a[$1] = $2; next }
       $1 != "#" { n++; d = $2 - a[$1]; if (d < 0) d = -d; if (!($1 in a) || d > tol * a[$1]) bad = 1 }
       END { exit bad || n == 0 }' "$1" "$2"
}
compare() {  # compare A B TOL WHAT
  if same_loss "$out/$1" "$out/$2" "$3"; then note "$4: equal within $3"; else status=1; note "$4: DIFFER"; fi
  paste "$out/$1" "$out/$2"
}

if [ "$gpus" -eq 1 ]; then
  # The same math on the CPU and on the GPU (cuBLAS sums in another order: 1e-3).
  run host1 "$bin/ddp_train" "${small[@]}" --comm self --target host --loss-log "$out/loss-host1.txt"
  run gpu1 "$bin/ddp_train" "${small[@]}" --comm self --target cuda --loss-log "$out/loss-gpu1.txt"
  compare loss-host1.txt loss-gpu1.txt 1e-3 "1 GPU vs 1 host rank, global batch 24"
  # An MPI singleton (bundled Open MPI, no mpirun): the same run.
  run gpu1-mpi "$bin/ddp_train" "${small[@]}" --comm mpi --target cuda --loss-log "$out/loss-gpu1-mpi.txt"
  compare loss-gpu1.txt loss-gpu1-mpi.txt 1e-6 "MPI singleton vs no MPI"
  # Throughput: 16 KiB records, batch 512, as train_loop's main job.
  run ddp-big "$bin/ddp_train" "${big[@]}" --comm self --target cuda
  run train-loop "$bin/train_loop" --data "/tmp/tl-big-$records" --records "$records" --record-kib 16 --batch 512 --epochs 3
  note "ddp_train samples/s (last epoch, total): $(awk '$1 ~ /^[0-9]+$/ {v = $5} END {print v}' "$out/ddp-big.log")"
  note "train_loop samples/s (last epoch): $(awk '$1 ~ /^[0-9]+$/ && NF >= 5 {v = $2} END {print v}' "$out/train-loop.log")"
else
  run gpu1 "$bin/ddp_train" "${small[@]}" --comm self --target cuda --loss-log "$out/loss-gpu1.txt"
  run "gpu$gpus" "${mpirun_[@]}" "$gpus" "$bin/ddp_train" "${small[@]}" --target cuda \
    --loss-log "$out/loss-gpu$gpus.txt"
  compare loss-gpu1.txt "loss-gpu$gpus.txt" 1e-4 "$gpus GPUs vs 1 GPU, global batch 24"
  if [ "$gpus" -ge 4 ]; then  # elastic resume 4 -> 2 and 4 -> 3 on GPUs
    run stop4 "${mpirun_[@]}" 4 "$bin/ddp_train" "${small[@]}" --target cuda --steps 130 \
      --checkpoint /tmp/ddp-ckpt.bin
    for n in 2 3; do
      run "resume$n" "${mpirun_[@]}" "$n" "$bin/ddp_train" "${small[@]}" --target cuda \
        --resume /tmp/ddp-ckpt.bin
    done
  fi
  run "big$gpus" "${mpirun_[@]}" "$gpus" "$bin/ddp_train" "${big[@]}" --target cuda
  note "ddp_train on $gpus GPUs, samples/s (last epoch, total): $(awk '$1 ~ /^[0-9]+$/ {v = $5} END {print v}' "$out/big$gpus.log")"
fi
echo "----"
printf '%s' "$summary"
{ printf '%s' "$summary"; for f in "$out"/*; do echo "===== $(basename "$f")"; cat "$f"; done; } \
  >"${OUT:-/tmp/gpufeed-out}/gpu-ddp.log"
exit "$status"
