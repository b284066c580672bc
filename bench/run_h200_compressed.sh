#!/usr/bin/env bash
# Compressed and cold data on the GPU machine, in one device call of about 5 minutes: the
# figures of the compressed-data targets, each beside the rate that bounds it in the same run.
#   bash bench/run_h200_compressed.sh [BIN_DIR]   # compressed_bench and gpufeed (default: the
#                                                 # bin/ folder of scripts/gpu-bundle.sh's bundle)
# Steps (data in /tmp/gpufeed-compressed, made with the machine's h5py):
#   1. bench/make_h5py_data.py: an h5py gzip + shuffle file with h5py's automatic chunks
#      (float32, 16 KiB rows, class-sorted labels) and a small class-sorted file for order quality
#   2. compressed_bench on the h5py file: single-thread decode, the same on every worker at once
#      (decodeN: what the machine's cores decode without the loader), sequential, block_shuffled,
#      shuffled (bounded)
#   3. the PyTorch peer (DataLoader + h5py) on the same file, shuffled (bounded)
#   4. gpufeed pack --from that file --compress lz4 / zstd; compressed_bench on each
#   4b. block_shuffled on each codec without decode-ahead and with windows of 16 and 32 units
#   5. gpufeed pack --from --compress none; compressed_bench --cold: dd, block_shuffled, shuffled
#      first passes over evicted shards
#   6. order quality: labels per batch and entropy for three windows and full random
# Writes $OUT/compressed.log (everything) and $OUT/compressed.json; prints a summary last.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$(cd "${1:-.gpu/bin}" && pwd) || { echo "no binary directory ${1:-.gpu/bin}"; exit 2; }
lib=$(cd "$bin/.." && pwd)/lib
out=${OUT:-/tmp/gpufeed-out}
data=/tmp/gpufeed-compressed
python=${PYTHON:-python3}
workers=${WORKERS:-14}
mkdir -p "$out" "$data"
log=$out/compressed.log
: >"$log"
cxx=(env "LD_LIBRARY_PATH=$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
deadline=$(( $(date +%s) + ${BUDGET_SECONDS:-540} ))
source "$root/bench/run_steps.sh"  # step NAME LIMIT RESULT COMMAND...
bench=("${cxx[@]}" "$bin/compressed_bench" --workers "$workers" --json)
gz=$data/h5py_gzip.h5
[ -f "$gz" ] || step make_gzip 120 - "$python" "$root/bench/make_h5py_data.py" gzip "$gz"
[ -f "$data/quality.h5" ] || step make_quality 60 - "$python" "$root/bench/make_h5py_data.py" quality "$data/quality.h5"
step gzip 100 "$out/gzip.json" "${bench[@]}" --seconds 6 \
  --cases decode1,decodeN,sequential,block,shuffled "$gz"
step pytorch 80 "$out/torch_gzip.json" "$python" "$root/bench/peers/pytorch_dataloader.py" \
  --file "$gz" --dataset data --no-verify --workers 0 --seconds 5 --min-batches 1 \
  --repeats 1 --budget-seconds 50 --json
for codec in lz4 zstd none; do
  rm -rf "$data/$codec"
  step "pack_$codec" 60 - "${cxx[@]}" "$bin/gpufeed" pack --from "$gz" --dataset data --labels labels \
    --compress "$codec" -o "$data/$codec" -q
done
step lz4 40 "$out/lz4.json" "${bench[@]}" --seconds 4 --cases decode1,decodeN,sequential,block "$data"/lz4/*.h5
step zstd 40 "$out/zstd.json" "${bench[@]}" --seconds 4 --cases decode1,decodeN,sequential,block "$data"/zstd/*.h5
# block_shuffled's settings beside its defaults: without decode-ahead, and smaller windows
# (16 and 32 units: less decoded-chunk cache, fewer labels per batch).
for codec in gzip lz4 zstd; do
  if [ $codec = gzip ]; then files=("$gz"); else files=("$data/$codec"/*.h5); fi
  step "${codec}_noahead" 30 "$out/${codec}_noahead.json" "${bench[@]}" --seconds 4 --cases block \
    --no-decode-ahead "${files[@]}"
  step "${codec}_windows" 40 "$out/${codec}_windows.json" "${bench[@]}" --seconds 4 --cases block \
    --windows 16,32 "${files[@]}"
done
step cold 80 "$out/cold.json" "${bench[@]}" --seconds 8 --cold --cases block,shuffled "$data"/none/*.h5
step quality 60 "$out/quality.json" "${bench[@]}" --seconds 3 --cases quality --windows 4,0,64 \
  "$data/quality.h5"
"$python" - "$out" <<'PY' 2>&1 | tee -a "$log"
import json, os, sys
out = sys.argv[1]
def load(n):
    try:
        with open(os.path.join(out, n + ".json")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return []
res = {n: load(n) for n in ["gzip", "torch_gzip", "lz4", "zstd", "cold", "quality"] +
       [c + s for c in ["gzip", "lz4", "zstd"] for s in ["_noahead", "_windows"]]}
with open(os.path.join(out, "compressed.json"), "w") as f:
    json.dump(res, f, indent=1)
def rate(n, case):
    for r in res[n] if isinstance(res[n], list) else []:
        if r.get("case") == case:
            return r.get("gb_per_s", 0.0), r
    return 0.0, {}
w = int(os.environ.get("WORKERS", "14"))
print("\n==== compressed data summary (GB/s delivered; targets from the compressed-data issue)")
for n in ["gzip", "lz4", "zstd", "cold", "quality"]:
    for r in res[n] if isinstance(res[n], list) else []:
        extra = ""
        if r.get("mean_distinct_labels"):
            extra = f"  labels/batch {r['mean_distinct_labels']:.1f} entropy {r['mean_label_entropy_bits']:.2f}"
        if r.get("decode"):
            extra += "  " + json.dumps(r["decode"])
        print(f"{n + '/' + r['case']:<30} {r['gb_per_s']:9.4f}{extra}")
torch = [r for r in res["torch_gzip"] if isinstance(r, dict)] if isinstance(res["torch_gzip"], list) else []
tbest = max([r.get("gb_per_s", 0) for r in torch if r.get("order", "shuffled") != "sequential"] or [0])
print(f"{'pytorch/gzip/shuffled best':<30} {tbest:9.4f}")
seq, _ = rate("gzip", "sequential"); blk, _ = rate("gzip", "block"); one, _ = rate("gzip", "decode1")
def t(name, ok, got, goal):
    print(f"target {name:<44} {'PASS' if ok else 'FAIL'}: {got:.3f} against {goal:.3f}")
t("gzip block >= 0.9 x sequential", blk >= 0.9 * seq, blk, 0.9 * seq)
t(f"gzip sequential >= 0.8 x {w} x decode1", seq >= 0.8 * w * one, seq, 0.8 * w * one)
t("gzip block >= 500 x PyTorch shuffled", tbest > 0 and blk >= 500 * tbest, blk / tbest if tbest else 0, 500)
l4, _ = rate("lz4", "block"); t("lz4 block >= 45 GB/s", l4 >= 45, l4, 45)
zb, _ = rate("zstd", "block"); z1, _ = rate("zstd", "decode1")
t(f"zstd block >= 0.8 x {w} x decode1", zb >= 0.8 * w * z1, zb, 0.8 * w * z1)
dd, _ = rate("cold", "dd"); cb, _ = rate("cold", "block")
t("cold block >= 0.9 x dd", cb >= 0.9 * dd, cb, 0.9 * dd)
print(f"\n==== where 'workers x decode1' goes: {w} independent single-thread decoders (decode{w})")
for n in ["gzip", "lz4", "zstd"]:
    one, _ = rate(n, "decode1"); many, _ = rate(n, f"decode{w}"); s, _ = rate(n, "sequential")
    b, _ = rate(n, "block")
    if one and many:
        print(f"{n:<5} decode{w} {many:7.3f} = {many / (w * one):.2f} x {w} x decode1; "
              f"sequential {s / many:.2f} x, block {b / many:.2f} x decode{w}")
print("\n==== block_shuffled settings (GB/s; default: decode-ahead on, default window)")
for n in ["gzip", "lz4", "zstd"]:
    s, _ = rate(n, "sequential"); b, rb = rate(n, "block"); na, rn = rate(n + "_noahead", "block")
    w16, r16 = rate(n + "_windows", "block/w16"); w32, r32 = rate(n + "_windows", "block/w32")
    def idle(r):
        return r.get("time", {}).get("idle", 0.0)
    print(f"{n:<5} sequential {s:7.3f}  block {b:7.3f} (idle {idle(rb):5.2f} s)  "
          f"no decode-ahead {na:7.3f} (idle {idle(rn):5.2f} s)  window 16 {w16:7.3f}  window 32 {w32:7.3f}")
PY
