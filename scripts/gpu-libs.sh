# Sourced on the GPU machine (by gpu-ddp.sh): puts the directories holding libnccl.so.2,
# libcublas.so.13 and libcublasLt.so.13 on LD_LIBRARY_PATH, from the CUDA Toolkit or the Python
# wheels (nvidia-nccl-cu13: site-packages/nvidia/nccl/lib; nvidia-cublas for CUDA 13:
# site-packages/nvidia/cu13/lib, older wheels nvidia/cublas/lib), and fails naming what is
# missing. GPUFEED_LIB_DIRS (colon-separated) is searched first.
gpufeed_find_lib() {
  local name=$1 d
  for d in ${GPUFEED_LIB_DIRS:+${GPUFEED_LIB_DIRS//:/ }} /usr/local/cuda/lib64 /usr/local/cuda/lib \
           /opt/torch/.venv/lib/python3*/site-packages/nvidia/*/lib \
           /usr/local/lib/python3*/site-packages/nvidia/*/lib \
           /usr/local/lib/python3*/dist-packages/nvidia/*/lib \
           /usr/lib/python3/dist-packages/nvidia/*/lib; do
    [ -e "$d/$name" ] && { echo "$d"; return 0; }
  done
  # The wheels wherever this python3 keeps them (nvidia is a namespace package: __path__).
  d=$(python3 -c 'import glob, os, sys, nvidia
for p in nvidia.__path__:
    for f in glob.glob(os.path.join(p, "*", "lib", sys.argv[1])): print(os.path.dirname(f)); sys.exit()' \
      "$name" 2>/dev/null) && [ -n "$d" ] && { echo "$d"; return 0; }
  return 1
}
for gpufeed_lib in libnccl.so.2 libcublas.so.13 libcublasLt.so.13; do
  gpufeed_dir=$(gpufeed_find_lib "$gpufeed_lib") || { echo "gpu-libs: $gpufeed_lib not found" >&2; return 1; }
  echo "gpu-libs: $gpufeed_lib in $gpufeed_dir"
  case ":${LD_LIBRARY_PATH:-}:" in *":$gpufeed_dir:"*) ;; *) export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$gpufeed_dir;; esac
done
