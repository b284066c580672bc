#!/usr/bin/env bash
# The headline benchmark run on the GPU machine, in one device call of about 5-6 minutes (at most
# 460 s of steps: each has its own limit, all share one deadline). From the repository root:
#   bash bench/run_h200.sh [BIN_DIR]      # BIN_DIR: gpufeed-bench and hdf5_read_bench (default:
#                                         # the bin/ folder of scripts/gpu-bundle.sh's bundle);
#                                         # their shared libraries in BIN_DIR/../lib
# Data in /tmp (generated once, reused while its stamps match). Steps:
#   1. gpufeed-bench --prepare-only: the 16 KiB HDF5 and LMDB data sets and the naive loader's files
#   2. the PyTorch peer's tuning sweep over the same HDF5 file (bounded to 140 s)
#   3. gpufeed-bench, 16 KiB HDF5 and LMDB: limits, the naive variants (per record; per batch on
#      1, 4, 8, 16 threads), the sweep, the best configuration 3 times (median and range), the
#      overlap cases; against the PyTorch best (--peer)
#   4. hdf5_read_bench: hdf5_source against pread and the one-row and batched H5Dread forms
#   5. images: make_photo_set cuts the photographs in $PHOTOS_SRC (default .photos/,
#      from bench/photos/get_skimage_photos.sh, carried to the GPU machine) into 3000 JPEGs in
#      /tmp/gpufeed-photos; pytorch_images.py (ImageFolder + RandomResizedCrop(224) + flip +
#      ToTensor, pin_memory) and image_bench (decode + crop + flip at 1 thread, W threads, and in
#      W loader workers) at W = 1, 4, 8, 16. RUN_H200_ONLY=images runs this step alone.
# Writes $OUT/h200.json ({"gpufeed_bench": [...], "pytorch": [...], "hdf5_read_bench": [...],
# "steps": {...}}) and $OUT/run.log (every step's progress and tables); prints a short table last.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$(cd "${1:-.gpu/bin}" && pwd) || { echo "no binary directory ${1:-.gpu/bin}"; exit 2; }
lib=$(cd "$bin/.." && pwd)/lib
out=${OUT:-/tmp/gpufeed-out}
data=/tmp/gpufeed-bench-data
work=$(mktemp -d /tmp/gpufeed-h200.XXXXXX)
python=${PYTHON:-python3}
mkdir -p "$out" "$data"
log=$out/run.log
: >"$log"
declare -A rc
# Bundled libraries for the C++ programs only: Python's torch and h5py bring their own.
cxx=(env "LD_LIBRARY_PATH=$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
# For a trial run elsewhere: RUN_H200_EXTRA="--tiny --target host" RUN_H200_GIB=0.05.
read -r -a extra <<<"${RUN_H200_EXTRA:-}"
combine() {  # combine quiet|table: $OUT/h200.json from the steps so far; "table" prints the summary
  local steps
  steps=$(for k in "${!rc[@]}"; do printf '"%s": %s,' "$k" "${rc[$k]}"; done)
  # quiet: called inside step(), whose stdout may be a result file: write only to the log.
  if [ "$1" = quiet ]; then combine_py "$1" >>"$log" 2>&1; else combine_py "$1" 2>&1 | tee -a "$log"; fi
}
combine_py() {
  "$python" - "$work" "$out/h200.json" "{${steps%,}}" "$1" <<'PY'
import json, os, sys
work, dest, steps, quiet = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), sys.argv[4] == "quiet"
def load(name):
    try:
        with open(os.path.join(work, name)) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        return {"error": f"{name}: {e}"}
res = {"steps": steps, "gpufeed_bench": load("bench.json"), "pytorch": load("torch.json"),
       "hdf5_read_bench": load("hdf5.json"), "image_bench": load("images.json"),
       "pytorch_images": load("torch_images.json")}
with open(dest, "w") as f:
    json.dump(res, f, indent=1)
if quiet:
    sys.exit(0)
print("\n==== summary (medians of 3 runs where repeated; exit status per step:", steps, ")")
g = res["gpufeed_bench"] if isinstance(res["gpufeed_bench"], list) else []
for r in g:
    if r.get("loader") == "naive" and "/C=" not in r["case"]:
        print(f"{r['case']:<34} {r.get('median_gb_per_s', r['gb_per_s']):7.3f} GB/s "
              f"[{r.get('min_gb_per_s', 0):.3f}-{r.get('max_gb_per_s', 0):.3f}]")
for r in g:
    if r.get("loader") == "summary":
        print(f"{r['case']:<34} {r['gpufeed_gb_per_s']:7.3f} GB/s [{r['gpufeed_min_gb_per_s']:.3f}-"
              f"{r['gpufeed_max_gb_per_s']:.3f}] ({r['gpufeed_case']}); x naive per record "
              f"{r['x_naive_per_record']:.1f}, per batch {r['x_naive_per_batch']:.1f}, "
              f"per batch on threads {r['x_naive_per_batch_threads']:.1f}")
    if r.get("loader") == "target":
        print(f"{r['case']:<34} pass {r.get('pass')}: measured {r.get('measured'):.3f}, "
              f"goal {r.get('goal')}")
    if r.get("case", "").startswith("overlap/naive/"):
        print(f"{r['case']:<34} step / (L_naive + C) = "
              f"{r['step_ms'] / max(1e-9, r['expected_step_ms']):.3f} (same run's L_naive "
              f"{r['load_ms']:.3f} ms)")
t = res["pytorch"] if isinstance(res["pytorch"], list) else []
for r in t:
    if r.get("best"):
        print(f"pytorch best: {r['config']}: {r['median_gb_per_s']:.3f} GB/s [{r['min_gb_per_s']:.3f}-"
              f"{r['max_gb_per_s']:.3f}], {r['median_records_per_s']:.0f} records/s")
h = res["hdf5_read_bench"] if isinstance(res["hdf5_read_bench"], list) else []
for r in h:
    if r.get("method") == "summary":
        print(f"hdf5_read_bench {r['file']}: hdf5_source {r['hdf5_source_gb_per_s']:.2f} GB/s = "
              f"{r['x_best_h5dread']:.1f}x best H5Dread ({r['best_h5dread']}, "
              f"{r['best_h5dread_gb_per_s']:.2f}), {r['x_best_random_h5dread']:.1f}x best random-order "
              f"H5Dread ({r['best_random_h5dread']}, {r['best_random_h5dread_gb_per_s']:.2f})")
for r in res["image_bench"] if isinstance(res["image_bench"], list) else []:
    if r.get("case", "").startswith("loader/"):
        print(f"image {r['case']:<22} {r['images_per_s']:8.0f} images/s = "
              f"{r['x_workers_single_thread']:.2f} x W x one thread (target 0.8: "
              f"{r['scaling_target_pass']}), {r.get('x_pytorch', 0):.2f} x PyTorch "
              f"{r.get('pytorch_images_per_s', 0):.0f} (target 2: {r.get('pytorch_target_pass')})")
PY
}
deadline=$((SECONDS + ${RUN_H200_SECONDS:-460}))  # all steps together, so the call stays < 8 min
step() {  # step NAME SECONDS COMMAND... (stdout: the caller redirects; stderr: the log)
  local name=$1 limit=$2 t0=$SECONDS left=$((deadline - SECONDS))
  shift 2
  [ "$left" -lt "$limit" ] && limit=$left
  if [ "$limit" -lt 15 ]; then
    rc[$name]=124
    echo "===== $name: skipped, the run's time is spent" >>"$log"
    return
  fi
  echo "===== $name (limit ${limit}s): $*" >>"$log"
  timeout --kill-after=5 "$limit" "$@" 2>>"$log"
  rc[$name]=$?
  echo "===== $name: exit ${rc[$name]} after $((SECONDS - t0)) s" >>"$log"
  combine quiet  # $OUT/h200.json after every step: a cut-off run keeps what it measured
}
{ date -u; nproc; free -g | head -2; df -h /dev/shm /tmp; nvidia-smi -L 2>&1; } >>"$log" 2>&1

images_step() {  # step 5 (see the top); its own steps, limits and result files
  local src=${PHOTOS_SRC:-$root/.photos} photos=/tmp/gpufeed-photos workers=${RUN_H200_IMAGE_WORKERS:-1,4,8,16}
  if [ ! -f "$photos.done" ]; then
    rm -rf "$photos" "$photos-shards"
    step photos 60 "${cxx[@]}" "$bin/make_photo_set" "$src" "$photos" 3000 1 >>"$log"
    [ "${rc[photos]}" = 0 ] && touch "$photos.done"
  fi
  step pytorch_images 150 "$python" "$root/bench/peers/pytorch_images.py" --root "$photos" \
    --workers "$workers" --seconds 3 --json >"$work/torch_images.json"
  local peer=()
  [ -s "$work/torch_images.json" ] && peer=(--peer "$work/torch_images.json")
  step image_bench 120 "${cxx[@]}" "$bin/image_bench" --photos "$photos" --shards "$photos-shards" \
    --workers "$workers" --seconds 3 "${peer[@]}" --json >"$work/images.json"
}
if [ "${RUN_H200_ONLY:-}" = images ]; then
  images_step
  combine table
  rm -rf "$work"
  exit 0
fi

common=(--data-dir "$data" --record-sizes 16384 --formats hdf5,lmdb "${extra[@]}")
step prepare 100 "${cxx[@]}" "$bin/gpufeed-bench" "${common[@]}" --prepare-only >>"$log"
h5=$(ls "$data"/hdf5_r16384_n*.h5 2>/dev/null | head -1)
step pytorch 170 "$python" "$root/bench/peers/pytorch_dataloader.py" --file "$h5" \
  --budget-seconds 140 --seconds 2 --repeats 3 --json >"$work/torch.json"
peer=()
[ -s "$work/torch.json" ] && peer=(--peer "$work/torch.json")
step gpufeed_bench 170 "${cxx[@]}" "$bin/gpufeed-bench" "${common[@]}" --workers 8,12,14,16 --prefetch 4,8 \
  --case-seconds 1 --repeats 3 --naive-threads 4,8,16 --skip first-batch,epochs "${peer[@]}" \
  --json >"$work/bench.json"
step hdf5_read_bench 240 "${cxx[@]}" "$bin/hdf5_read_bench" --gib "${RUN_H200_GIB:-0.5}" --threads "${RUN_H200_THREADS:-16}" --dir /tmp --json \
  >"$work/hdf5.json"
images_step

combine table
rm -rf "$work"
