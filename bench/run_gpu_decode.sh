#!/usr/bin/env bash
# Decoding on the GPU against decoding in the workers, on the GPU machine, in one device call:
# the same files and orders, loader_config::decode host and device, in the same run.
#   bash bench/run_gpu_decode.sh [BIN_DIR]   # compressed_bench and gpufeed (default: the bin/
#                                            # folder of scripts/gpu-bundle.sh's bundle)
# Data (in /tmp/gpufeed-gpu-decode, made with the machine's h5py): an h5py gzip + shuffle file
# with h5py's automatic chunks (float32, 16 KiB rows; ROWS rows), and `gpufeed pack --from` it
# with --compress lz4 and bitshuffle-lz4. For each: compressed_bench's h2d case (the pinned
# link), then sequential and block_shuffled with HOST_WORKERS workers decoding on the host, and
# with DEVICE_WORKERS workers staging for the device (beside one core's and every worker's decode
# rate alone), and gpu_decode_bench (the kernels on device-resident chunks). Writes
# $OUT/gpu_decode.log and one JSON per run; prints a table last: GB/s delivered, the ratio to
# host decode and to the link, the workers' CPU seconds per delivered GB, and what crossed the
# link per delivered byte. Knobs (environment): ROWS, HOST_WORKERS (14), DEVICE_WORKERS (4),
# SECONDS_PER_CASE (4), WINDOW (block_shuffled window in units; 0: the default), DEVICE_CACHE_MIB
# (the device cache of the sequential cases; 0: automatic), BLOCK_CACHE_MIB (block_shuffled's;
# default DEVICE_CACHE_MIB), KERNEL_MIB and KERNEL_REPS (gpu_decode_bench), BUDGET_SECONDS.
# A device cache that holds the whole dataset decodes it in the first epoch only: the table's
# link/out column (compressed bytes over the link per delivered byte) shows whether later
# epochs decoded again.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$(cd "${1:-.gpu/bin}" && pwd) || { echo "no binary directory ${1:-.gpu/bin}"; exit 2; }
lib=$(cd "$bin/.." && pwd)/lib
out=${OUT:-/tmp/gpufeed-out}
data=/tmp/gpufeed-gpu-decode
python=${PYTHON:-python3}
rows=${ROWS:-65536}
host_workers=${HOST_WORKERS:-14}
device_workers=${DEVICE_WORKERS:-4}
seconds=${SECONDS_PER_CASE:-4}
mkdir -p "$out" "$data"
log=$out/gpu_decode.log
: >"$log"
cxx=(env "LD_LIBRARY_PATH=$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
deadline=$(( $(date +%s) + ${BUDGET_SECONDS:-500} ))
source "$root/bench/run_steps.sh"  # step NAME LIMIT RESULT COMMAND...
gz=$data/h5py_gzip.h5
[ -f "$gz" ] || step make_gzip 150 - "$python" "$root/bench/make_h5py_data.py" gzip "$gz" --rows "$rows"
for codec in lz4 bitshuffle-lz4; do
  [ -d "$data/$codec" ] || step "pack_$codec" 90 - "${cxx[@]}" "$bin/gpufeed" pack --from "$gz" \
    --dataset data --labels labels --compress "$codec" -o "$data/$codec" -q
done
bench=("${cxx[@]}" "$bin/compressed_bench" --json --seconds "$seconds")
step h2d 30 "$out/h2d.json" "${bench[@]}" --cases h2d "$gz"
for set in gzip lz4 bitshuffle-lz4; do
  if [ $set = gzip ]; then files=("$gz"); else files=("$data/$set"/*.h5); fi
  step "${set}_host" 80 "$out/${set}_host.json" "${bench[@]}" --workers "$host_workers" \
    --decode host --cases decode1,decodeN,sequential,block --windows "${WINDOW:-0}" "${files[@]}"
  # A cache below the data's decoded size: every epoch decodes again, as over a dataset larger
  # than the cache; with the automatic cache (up to 4 GiB) a small dataset stays decoded on the
  # device after its first epoch and later epochs only gather.
  step "${set}_device" 60 "$out/${set}_device.json" "${bench[@]}" --workers "$device_workers" \
    --decode device --cases sequential --device-cache-mib "${DEVICE_CACHE_MIB:-0}" "${files[@]}"
  step "${set}_device_block" 60 "$out/${set}_device_block.json" "${bench[@]}" \
    --workers "$device_workers" --decode device --cases block --windows "${WINDOW:-0}" \
    --device-cache-mib "${BLOCK_CACHE_MIB:-${DEVICE_CACHE_MIB:-0}}" "${files[@]}"
done
# The kernels alone, on device-resident chunks (their rate without the link or the workers).
step kernels 60 "$out/gpu_decode_bench.txt" "${cxx[@]}" "$bin/gpu_decode_bench" \
  --mib "${KERNEL_MIB:-512}" --reps "${KERNEL_REPS:-5}"
"$python" - "$out" "$host_workers" "$device_workers" "${WINDOW:-0}" <<'PY' 2>&1 | tee -a "$log"
import json, os, sys
out, hw, dw, window = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
def load(n):
    try:
        with open(os.path.join(out, n + ".json")) as f:
            r = json.load(f)
            return r if isinstance(r, list) else []
    except (OSError, ValueError):
        return []
def case(rs, name):
    for r in rs if isinstance(rs, list) else []:
        if r.get("case") == name:
            return r
    return {}
link = case(load("h2d"), "h2d").get("gb_per_s", 0.0)
print(f"\n==== decode on the GPU against the workers (pinned H2D {link:.1f} GB/s; host: {hw} "
      f"workers, device: {dw})")
print(f"{'data / order':<30} {'host GB/s':>9} {'device':>9} {'x host':>7} {'x link':>7} "
      f"{'cpu s/GB host':>13} {'device':>7} {'link/out':>8} {'redone':>6} {'no room':>7}")
for s in ["gzip", "lz4", "bitshuffle-lz4"]:
    h, d = load(s + "_host"), load(s + "_device") + load(s + "_device_block")
    one, many = case(h, "decode1").get("gb_per_s", 0.0), case(h, "decode" + hw).get("gb_per_s", 0.0)
    print(f"{s:<30} CPU decode alone: 1 core {one:.2f} GB/s, {hw} cores {many:.2f} GB/s")
    for c in ["sequential", "block" if window == "0" else "block/w" + window]:
        rh, rd = case(h, c), case(d, c)
        gh, gd = rh.get("gb_per_s", 0.0), rd.get("gb_per_s", 0.0)
        def cpu(r):
            gb = r.get("gb_per_s", 0.0) * r.get("seconds", 0.0)
            return r.get("time", {}).get("cpu", 0.0) / gb if gb else 0.0
        dd = rd.get("device_decode", {})
        moved = dd.get("compressed_bytes", 0) + dd.get("host_bytes", 0)
        gathered = dd.get("gathered_bytes", 0)
        print(f"{s + ' / ' + c:<30} {gh:9.2f} {gd:9.2f} {gd / gh if gh else 0:7.2f} "
              f"{gd / link if link else 0:7.2f} {cpu(rh):13.2f} {cpu(rd):7.2f} "
              f"{moved / gathered if gathered else 0:8.3f} {dd.get('batches_redone', 0):6} "
              f"{dd.get('no_room', 0):7}")
PY
[ -f "$out/gpu_decode_bench.txt" ] && cat "$out/gpu_decode_bench.txt"
