#!/usr/bin/env bash
# Developer tool for the GPU machine (which has a driver but none of this machine's -dev
# packages): copies the given built programs into the bundle folder's bin/ and the shared
# libraries they load into its lib/. Then run them there with scripts/gpu-run.sh.
#   scripts/gpu-bundle.sh build/tests/cuda/test_cuda_handles build/examples/device_report ...
set -euo pipefail
# Copies the shared libraries that the programs load into DIR/lib, except those the GPU machine
# must provide itself: the C and C++ runtimes and the NVIDIA driver's libraries.
bundle_libs() {
  local dir=$1 bin name path n=0
  shift
  local skip='^(linux-vdso|ld-linux|lib(c|m|dl|rt|pthread|resolv|util|nsl|anl)\.so|libgcc_s|libstdc\+\+|libcuda\.so|libnvidia-)'
  mkdir -p "$dir/lib"
  for bin in "$@"; do
    while read -r name path; do
      [[ $name =~ $skip ]] && continue
      [ -f "$path" ] || continue
      if [ ! -e "$dir/lib/$name" ]; then cp -L "$path" "$dir/lib/$name"; n=$((n + 1)); fi
    done < <(ldd "$bin" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}')
  done
  echo "gpu-bundle: $n libraries copied to $dir/lib ($(du -sh "$dir/lib" | cut -f1))"
}
root=$(cd "$(dirname "$0")/.." && pwd)
rm -rf "$root/.gpu"
mkdir -p "$root/.gpu/bin"
cp "$@" "$root/.gpu/bin/"
cp "$root/scripts/gpu-run.sh" "$root/.gpu/"
bundle_libs "$root/.gpu" "$@"
du -sh "$root/.gpu"
