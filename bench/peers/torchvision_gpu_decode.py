#!/usr/bin/env python3
"""torchvision's batched GPU JPEG decode (nvJPEG): the peer of image_gpu_bench's decode cases.

What a PyTorch user writes to decode on the GPU:
  data = [torchvision.io.read_file(p) for p in files]           # uint8 CPU tensors
  imgs = torchvision.io.decode_jpeg(data[i:i+B], device="cuda")  # a list of CHW uint8 tensors
Measured two ways on the same files as image_gpu_bench (--root, every .jpg/.jpeg under it):
  torchvision/decode-only/batch=B          decode_jpeg of batches of B files already in memory
  torchvision/decode+crop/batch=B          the same, then per image RandomResizedCrop(size) +
                                           RandomHorizontalFlip (transforms.v2 on the GPU
                                           tensor), stacked and normalised to half
for --seconds each, after one warm-up batch, torch.cuda.synchronize() before the clock stops.

  python3 bench/peers/torchvision_gpu_decode.py --root /tmp/gpufeed-photos --json
  python3 bench/peers/torchvision_gpu_decode.py --dry-run    # the plan, without torch
Prints one JSON array (--json): {"case", "images_per_s", ...} per case.
"""

import argparse
import json
import os
import sys
import time


def jpeg_files(root):
    out = []
    for d, _, files in os.walk(root):
        out += [os.path.join(d, f) for f in files if f.lower().endswith((".jpg", ".jpeg"))]
    return sorted(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n", 2)[2])
    ap.add_argument("--root", help="directory of JPEGs (class folders as image_bench uses)")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--seconds", type=float, default=3.0, help="timed seconds per case")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--dry-run", action="store_true", help="print the plan and exit (no torch)")
    args = ap.parse_args()
    cases = ["decode-only", "decode+crop"]
    if args.dry_run:
        for c in cases:
            print(f"plan: torchvision/{c}/batch={args.batch}: decode_jpeg(device='cuda')")
        return
    if not args.root:
        sys.exit("--root is required")
    import torch
    import torchvision
    from torchvision.transforms import v2

    if not torch.cuda.is_available():
        sys.exit("torchvision_gpu_decode: no CUDA device")
    files = jpeg_files(args.root)
    if len(files) < args.batch:
        sys.exit(f"torchvision_gpu_decode: {len(files)} JPEGs under {args.root}, fewer than a batch")
    data = [torchvision.io.read_file(p) for p in files]
    print(f"torchvision_gpu_decode: {len(files)} files, torch {torch.__version__}, "
          f"torchvision {torchvision.__version__}", file=sys.stderr)
    crop = v2.Compose([v2.RandomResizedCrop(args.size, antialias=True), v2.RandomHorizontalFlip()])
    mean = torch.tensor([0.485, 0.456, 0.406], device="cuda").view(1, 3, 1, 1) * 255
    std = torch.tensor([0.229, 0.224, 0.225], device="cuda").view(1, 3, 1, 1) * 255

    def run(case, start):
        # ImageFolder-style photo sets hold some grayscale JPEGs: ask for RGB like PIL's convert.
        imgs = torchvision.io.decode_jpeg(data[start:start + args.batch], device="cuda",
                                          mode=torchvision.io.ImageReadMode.RGB)
        if case == "decode+crop":
            x = torch.stack([crop(i) for i in imgs]).float()
            (((x - mean) / std).half())
        return len(imgs)

    results = []
    for case in cases:
        run(case, 0)
        torch.cuda.synchronize()
        images = batches = 0
        start = 0
        t0 = time.perf_counter()
        while batches < 2 or time.perf_counter() - t0 < args.seconds:
            images += run(case, start)
            batches += 1
            start = (start + args.batch) % (len(files) - args.batch + 1)
        torch.cuda.synchronize()
        secs = time.perf_counter() - t0
        r = {"case": f"torchvision/{case}/batch={args.batch}", "images_per_s": images / secs,
             "batches": batches, "seconds": secs, "torch": torch.__version__,
             "torchvision": torchvision.__version__}
        print(f"{r['case']:<36} {r['images_per_s']:9.0f} images/s", file=sys.stderr)
        results.append(r)
    if args.json:
        print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
