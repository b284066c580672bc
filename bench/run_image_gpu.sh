#!/usr/bin/env bash
# JPEG decode + RandomResizedCrop(224) + flip + normalise into GPU memory, nvJPEG + the fused
# crop kernel against the CPU path and torchvision, on the GPU machine in one device call:
#   bash bench/run_image_gpu.sh [BIN_DIR]   # make_photo_set, image_gpu_bench and the GPU tests
#                                           # (default: the bin/ folder of scripts/gpu-bundle.sh's
#                                           # bundle)
# Made there: scripts/gpu-bundle.sh build/bench/make_photo_set build/bench/image_gpu_bench \
#   build/tests/image/test_crop_kernel build/tests/image/test_jpeg_decode_gpu \
#   build/tests/image/test_image_loader_gpu build/tests/image/test_nvjpeg_abi   (the last where
#   the build machine has nvjpeg.h)
# Steps, each bounded (bench/run_steps.sh): the photo set (make_photo_set from $PHOTOS_SRC,
# default .photos/ from bench/photos/get_skimage_photos.sh: 3000 JPEGs in /tmp/gpufeed-photos,
# one in ten progressive), the GPU tests (their output in the log: the nvJPEG-vs-TurboJPEG
# differences are printed there), image_gpu_bench at WORKERS (1,2,4), torchvision's batched GPU
# decode, and PyTorch DataLoader + PIL with ToTensor and PILToTensor at the same worker counts.
# Writes $OUT/image_gpu.log and one JSON per step; prints a table last. Knobs (environment):
# WORKERS, SECONDS_PER_CASE (3), DTYPE (f16), STEP_MS (image_gpu_bench --step-ms; 0: none),
# BUDGET_SECONDS (480), PYTHON.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$(cd "${1:-.gpu/bin}" && pwd) || { echo "no binary directory ${1:-.gpu/bin}"; exit 2; }
lib=$(cd "$bin/.." && pwd)/lib
out=${OUT:-/tmp/gpufeed-out}
python=${PYTHON:-python3}
workers=${WORKERS:-1,2,4}
seconds=${SECONDS_PER_CASE:-3}
photos=/tmp/gpufeed-photos
mkdir -p "$out"
log=$out/image_gpu.log
: >"$log"
cxx=(env "LD_LIBRARY_PATH=$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
deadline=$(( $(date +%s) + ${BUDGET_SECONDS:-480} ))
source "$root/bench/run_steps.sh"  # step NAME LIMIT RESULT COMMAND...
{ date -u; nproc; nvidia-smi -L 2>&1; } >>"$log" 2>&1
if [ ! -f "$photos.done" ]; then
  rm -rf "$photos" "$photos-shards"
  step photos 60 - "${cxx[@]}" "$bin/make_photo_set" "${PHOTOS_SRC:-$root/.photos}" "$photos" 3000 1 &&
    [ -d "$photos" ] && touch "$photos.done"
fi
for t in test_nvjpeg_abi test_crop_kernel test_jpeg_decode_gpu test_image_loader_gpu; do
  [ -x "$bin/$t" ] && step "$t" 60 - "${cxx[@]}" "$bin/$t"
done
step image_gpu_bench 240 "$out/image_gpu_bench.json" "${cxx[@]}" "$bin/image_gpu_bench" \
  --photos "$photos" --shards "$photos-shards" --workers "$workers" --seconds "$seconds" \
  --dtype "${DTYPE:-f16}" --step-ms "${STEP_MS:-0}" --json
step torchvision_gpu 90 "$out/torchvision_gpu.json" "$python" \
  "$root/bench/peers/torchvision_gpu_decode.py" --root "$photos" --seconds "$seconds" --json
step pytorch_images 150 "$out/pytorch_images.json" "$python" "$root/bench/peers/pytorch_images.py" \
  --root "$photos" --workers "$workers" --seconds "$seconds" --convert ToTensor,PILToTensor --json
"$python" - "$out" <<'PY' 2>&1 | tee -a "$log"
import json, os, sys
out = sys.argv[1]
rows = []
for name in ("image_gpu_bench", "torchvision_gpu", "pytorch_images"):
    try:
        with open(os.path.join(out, name + ".json")) as f:
            rows += json.load(f)
    except (OSError, ValueError) as e:
        print(f"{name}: no result ({e.__class__.__name__})")
for r in rows:
    extra = ""
    if "decoded_gpu" in r:
        extra = (f"  ({r['nvjpeg_backend']}: {r['decoded_gpu']} on the GPU, {r['decoded_cpu']} on the CPU,"
                 f" {r['moved_to_cpu']} of them the GPU's)")
    if "batch_ms_p50" in r:
        extra += f"  batch p50 {r['batch_ms_p50']:.2f} ms, p99 {r['batch_ms_p99']:.2f} ms"
    if "step_ratio" in r:
        extra += f"  step ratio {r['step_ratio']:.3f}"
    if "ms_per_batch" in r:
        m = r["ms_per_batch"]
        extra += (f"  ms/batch: wait {m['wait']:.1f} copy {m['copy']:.1f} decode {m['decode']:.1f}"
                  f" (plan {m['plan']:.1f} submit {m['submit']:.1f} host {m['host']:.1f})")
    print(f"{r['case']:<40} {r['images_per_s']:9.0f} images/s{extra}")
PY
