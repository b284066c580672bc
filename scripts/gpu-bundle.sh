#!/usr/bin/env bash
# Developer tool for the GPU machine (which has a driver but none of this machine's -dev
# packages): copies the given built programs into .gpu/bin and the shared libraries they load
# into .gpu/lib. Then run them there with scripts/gpu-run.sh.
#   scripts/gpu-bundle.sh build/tests/cuda/test_cuda_handles build/examples/device_report ...
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
rm -rf "$root/.gpu"
mkdir -p "$root/.gpu/bin"
cp "$@" "$root/.gpu/bin/"
cp "$root/scripts/gpu-run.sh" "$root/.gpu/"
../shared/tools/bundle-libs "$root/.gpu" "$@"
du -sh "$root/.gpu"
