# Sourced by run.sh and test.sh: configure and build one build tree.
#   gpufeed_build <build-dir> [extra cmake args...]
# GPUFEED_TARGETS (space-separated) builds only those targets; unset builds everything.
# GPUFEED_CMAKE_ARGS (space-separated) are added to the configure command (CI's check build).
gpufeed_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
gpufeed_jobs=$(nproc 2>/dev/null || echo 2)
gpufeed_cuda_args=()
if [ -x /usr/local/cuda/bin/nvcc ]; then
  gpufeed_cuda_args=(-DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc -DCUDAToolkit_ROOT=/usr/local/cuda)
fi
gpufeed_build() {
  local dir=$1; shift
  mkdir -p "$dir"
  cmake -S "$gpufeed_root" -B "$dir" -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-Release}" \
    "${gpufeed_cuda_args[@]}" ${GPUFEED_CMAKE_ARGS:-} "$@" >"$dir/configure.log" 2>&1 ||
    { cat "$dir/configure.log"; return 1; }
  grep -E "gpufeed" "$dir/configure.log" || true
  local targets=()
  for t in ${GPUFEED_TARGETS:-}; do targets+=(--target "$t"); done
  cmake --build "$dir" -j "$gpufeed_jobs" "${targets[@]}"
}
