#!/usr/bin/env python3
"""PyTorch DataLoader + torchvision over a directory of JPEGs: the peer of bench/image_bench.

What a PyTorch user writes for ImageNet-style training input (torchvision's reference recipe):
  ImageFolder(root, transform=Compose([RandomResizedCrop(224), RandomHorizontalFlip(),
              ToTensor()]))     # PIL decode (pil_loader: Image.open(f).convert("RGB"))
  DataLoader(ds, batch_size=B, shuffle=True, num_workers=W, pin_memory=True,
             persistent_workers=True, prefetch_factor=2, drop_last=True)
each batch .to(device, non_blocking=True); the clock stops after torch.cuda.synchronize().
Measured at each --workers count on the same files as image_bench, after a warm-up of
max(2, workers) batches (every worker started; the page cache warm from a first read of every
file).

  python3 bench/peers/pytorch_images.py --root /tmp/gpufeed-photos --workers 1,4,8,16 --json
  python3 bench/peers/pytorch_images.py --dry-run      # the plan, without torch
--convert PILToTensor (or ToTensor,PILToTensor) measures the uint8 PILToTensor() variant too
(case pytorch/images-piltotensor/wW): the tensor a GPU-side normalisation would start from.
Prints one JSON array (--json): {"case", "workers", "images_per_s", ...} per count.
Needs torch, torchvision and pillow (not for --help or --dry-run).
"""

import argparse
import json
import os
import sys
import time


def warm_page_cache(root):
    n = 0
    for d, _, files in os.walk(root):
        for f in files:
            with open(os.path.join(d, f), "rb") as fh:
                n += len(fh.read())
    return n


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n", 2)[2])
    ap.add_argument("--root", help="ImageFolder root (class folders of JPEGs)")
    ap.add_argument("--workers", default="1,4,8,16", help="comma-separated num_workers values")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--seconds", type=float, default=3.0, help="timed seconds per case")
    ap.add_argument("--device", default=None, help="default: cuda when available, else cpu")
    ap.add_argument("--convert", default="ToTensor",
                    help="comma-separated: ToTensor (float CHW), PILToTensor (uint8 CHW)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--dry-run", action="store_true", help="print the plan and exit (no torch)")
    args = ap.parse_args()
    workers = [int(w) for w in args.workers.split(",") if w]
    converts = [c for c in args.convert.split(",") if c]
    for c in converts:
        if c not in ("ToTensor", "PILToTensor"):
            sys.exit(f"--convert: {c} is not ToTensor or PILToTensor")
    prefix = {"ToTensor": "pytorch/images", "PILToTensor": "pytorch/images-piltotensor"}
    if args.dry_run:
        for c in converts:
            for w in workers:
                print(f"plan: {prefix[c]}/w{w}: ImageFolder + RandomResizedCrop({args.size}) + "
                      f"RandomHorizontalFlip + {c}, batch {args.batch}, pin_memory")
        return
    if not args.root:
        sys.exit("--root is required")
    import torch
    import torchvision
    from torch.utils.data import DataLoader
    from torchvision import datasets, transforms

    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    def dataset(convert):
        tf = transforms.Compose([transforms.RandomResizedCrop(args.size),
                                 transforms.RandomHorizontalFlip(),
                                 getattr(transforms, convert)()])
        return datasets.ImageFolder(args.root, transform=tf)

    ds = dataset(converts[0])
    nbytes = warm_page_cache(args.root)
    print(f"pytorch_images: {len(ds)} files, {nbytes / 1e6:.1f} MB, {len(ds.classes)} classes, "
          f"device {device}, torch {torch.__version__}, torchvision {torchvision.__version__}",
          file=sys.stderr)
    results = []
    for convert, w in [(c, w) for c in converts for w in workers]:
        ds = dataset(convert)
        kw = dict(batch_size=args.batch, shuffle=True, num_workers=w, drop_last=True,
                  pin_memory=device.type == "cuda", persistent_workers=w > 0)
        if w > 0:
            kw.update(prefetch_factor=2, timeout=120)
        loader = DataLoader(ds, **kw)

        def forever():
            while True:
                yield from loader

        it = forever()
        warm = max(2, w)  # one batch per worker: every worker has started and run
        for _ in range(warm):
            x, _ = next(it)
            x.to(device, non_blocking=True)
        if device.type == "cuda":
            torch.cuda.synchronize()
        images = batches = 0
        t0 = time.perf_counter()
        while batches < 2 or time.perf_counter() - t0 < args.seconds:
            x, y = next(it)
            x = x.to(device, non_blocking=True)
            y = y.to(device, non_blocking=True)
            images += x.shape[0]
            batches += 1
        if device.type == "cuda":
            torch.cuda.synchronize()
        secs = time.perf_counter() - t0
        del it, loader
        r = {"case": f"{prefix[convert]}/w{w}", "workers": w, "convert": convert, "images_per_s": images / secs,
             "batches": batches, "seconds": secs, "batch_size": args.batch, "target": device.type,
             "warmup_batches": warm, "torch": torch.__version__,
             "torchvision": torchvision.__version__}
        print(f"{r['case']:<32} {r['images_per_s']:9.0f} images/s", file=sys.stderr)
        results.append(r)
    if args.json:
        print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
