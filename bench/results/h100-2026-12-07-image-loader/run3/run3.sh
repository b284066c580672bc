#!/usr/bin/env bash
# GPU run 3: the GPU image tests, image_gpu_bench at 4 and 16 workers (with a 30 ms simulated
# step), torchvision's GPU decode and the PyTorch DataLoader at 4 workers, in one call.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
g=$root/.gpu
export LD_LIBRARY_PATH=$g/lib GPUFEED_REQUIRE_GPU=1
out=${OUT:-/tmp/out}
mkdir -p "$out/r"
photos=/tmp/gpufeed-photos
"$g/bin/make_photo_set" "$root/.photos" "$photos" 3000 1 > "$out/r/photos.log" 2>&1
for t in test_jpeg_decode_gpu test_image_loader_gpu test_crop_kernel; do
  timeout 120 "$g/bin/$t" > "$out/r/$t.log" 2>&1; echo "$t rc=$?" | tee -a "$out/r/tests.txt"
done
timeout 240 "$g/bin/image_gpu_bench" --photos "$photos" --shards "$photos-shards" --workers 4,16 \
  --seconds 4 --step-ms 30 --json > "$out/r/image_gpu_bench.json" 2> "$out/r/image_gpu_bench.log"
timeout 60 python3 "$root/bench/peers/torchvision_gpu_decode.py" --root "$photos" --seconds 3 --json \
  > "$out/r/torchvision_gpu.json" 2> "$out/r/torchvision_gpu.log"
timeout 90 python3 "$root/bench/peers/pytorch_images.py" --root "$photos" --workers 4 --seconds 3 \
  --convert ToTensor,PILToTensor --json > "$out/r/pytorch_images.json" 2> "$out/r/pytorch_images.log"
tar -C "$out" -czf "$out/results.tgz" r && rm -rf "$out/r/"*.json
grep -E "test cases|ERROR" "$out"/r/test_*.log | head -20
cat "$out/r/tests.txt"
python3 - "$out" <<'PY'
import json, sys, tarfile, io
t = tarfile.open(sys.argv[1] + "/results.tgz")
for n in ("r/torchvision_gpu.json", "r/pytorch_images.json"):
    try:
        for r in json.load(t.extractfile(n)):
            print(f"{r['case']:<40} {r['images_per_s']:9.0f} images/s")
    except Exception as e:
        print(n, e)
PY
cat "$out/r/image_gpu_bench.log"
