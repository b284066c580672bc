#!/usr/bin/env bash
# GPU run 2: every GPU test, then decode = device at prefetch 8 / 16 / 32 against host decode,
# then uncompressed shuffled / block_shuffled at 256 B and 16 KiB. Logs under $OUT.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
g=$root/.gpu
export LD_LIBRARY_PATH=$g/lib
out=${OUT:-/tmp/out}
mkdir -p "$out/dec" "$out/sweep"
bash "$g/gpu-run.sh" > "$out/tests_table.txt" 2>&1
d=/tmp/gd; mkdir -p $d
python3 "$root/bench/make_h5py_data.py" gzip $d/gz.h5 --rows 65536 > "$out/dec/make.log" 2>&1
for c in lz4 bitshuffle-lz4; do
  timeout 120 "$g/bin/gpufeed" pack --from $d/gz.h5 --dataset data --labels labels --compress $c -o $d/$c -q >> "$out/dec/make.log" 2>&1
done
cb() { timeout 90 "$g/bin/compressed_bench" --json --seconds 2 "$@"; }
cb --cases h2d $d/gz.h5 > "$out/dec/h2d.json" 2>>"$out/dec/err.log"
for set in gzip lz4 bitshuffle-lz4; do
  if [ $set = gzip ]; then files=($d/gz.h5); else files=($d/$set/*.h5); fi
  cb --workers 14 --decode host --cases sequential,block "${files[@]}" > "$out/dec/${set}_host.json" 2>>"$out/dec/err.log"
  for p in 8 16 32; do
    cb --workers 4 --prefetch $p --decode device --device-cache-mib 512 --cases sequential,block "${files[@]}" \
      > "$out/dec/${set}_device_p$p.json" 2>>"$out/dec/err.log"
  done
done
timeout 150 "$g/bin/gpufeed-bench" --target cuda --formats hdf5 --orders shuffled,block_shuffled,sequential \
  --workers 14 --prefetch 4 --repeats 2 --case-seconds 0.5 --skip naive,overlap,first-batch,epochs --json \
  --record-sizes 256,4096,16384 --dataset-mib 128 > "$out/sweep/sweep.json" 2> "$out/sweep/sweep.log"
python3 - "$out" <<'PY'
import json, os, sys, glob
out = sys.argv[1]
def load(p):
    try:
        r = json.load(open(p)); return r if isinstance(r, list) else [r]
    except Exception as e:
        return []
link = next((r.get("gb_per_s", 0) for r in load(f"{out}/dec/h2d.json") if r.get("case") == "h2d"), 0)
print(f"pinned H2D {link:.1f} GB/s")
print(f"{'set':<16}{'case':<12}{'host14':>8}{'dev p8':>8}{'p16':>8}{'p32':>8}  idle/worker_s p8 p32")
for s in ["gzip", "lz4", "bitshuffle-lz4"]:
    h = {r["case"]: r for r in load(f"{out}/dec/{s}_host.json")}
    ds = {p: {r["case"]: r for r in load(f"{out}/dec/{s}_device_p{p}.json")} for p in (8, 16, 32)}
    for c in ["sequential", "block"]:
        g = lambda m: m.get(c, {}).get("gb_per_s", 0)
        idle = lambda m: m.get(c, {}).get("time", {})
        i8, i32 = idle(ds[8]), idle(ds[32])
        print(f"{s:<16}{c:<12}{g(h):8.2f}{g(ds[8]):8.2f}{g(ds[16]):8.2f}{g(ds[32]):8.2f}  "
              f"{i8.get('idle',0):.1f}/{i8.get('worker_seconds',0):.1f} {i32.get('idle',0):.1f}/{i32.get('worker_seconds',0):.1f}")
PY
tail -30 "$out/sweep/sweep.log"
cat "$out/tests_table.txt" | tail -25
# The GPU image path: the tests, then image_gpu_bench at 4 and 16 workers with a 30 ms step.
photos=/tmp/gpufeed-photos
"$g/bin/make_photo_set" "$root/.photos" "$photos" 3000 1 > "$out/photos.log" 2>&1
for t in test_jpeg_decode_gpu test_image_loader_gpu; do :; done
timeout 200 "$g/bin/image_gpu_bench" --photos "$photos" --shards "$photos-shards" --workers 4,16 \
  --seconds 3 --step-ms 30 --json > "$out/image_gpu_bench.json" 2> "$out/image_gpu_bench.log"
cat "$out/image_gpu_bench.log"
