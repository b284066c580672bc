#!/usr/bin/env bash
# Developer tool: bundles examples/ddp_train (with its MPI plugin), examples/train_loop and a
# relocatable copy of Debian's Open MPI into .gpu/ for the GPU machine, which has the NVIDIA
# driver, CUDA, PyTorch's wheels (nvidia-nccl-cu13, nvidia-cublas) and mpi4py (whose wheels ship
# no MPI library and no mpirun), but no Open MPI. Then, there: bash .gpu/gpu-ddp.sh [GPUS].
#   GPUFEED_TARGETS="ddp_train ddp_train_mpi train_loop" bash scripts/run.sh   (or cmake --build)
#   scripts/ddp-bundle.sh [BUILD_DIR]
# libnccl (~210 MB) and libcublas/libcublasLt (~600 MB) are too big to carry: gpu-ddp.sh finds
# the GPU machine's own copies (gpu-libs.sh). Open MPI (~16 MB) runs from .gpu/openmpi through
# OPAL_PREFIX: its components, help files and orted live under that prefix as under /usr.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
ddp=$build/examples/ddp_train
bash "$root/scripts/gpu-bundle.sh" "$ddp/ddp_train" "$build/examples/train_loop"
cp "$ddp/libddp_train_mpi.so" "$root/.gpu/bin/"
cp "$root/scripts/gpu-ddp.sh" "$root/scripts/gpu-libs.sh" "$root/.gpu/"
rm -f "$root"/.gpu/lib/libnccl.so* "$root"/.gpu/lib/libcublas.so* "$root"/.gpu/lib/libcublasLt.so*
# Open MPI, laid out under its own prefix as Debian installs it under /usr.
mpi=$root/.gpu/openmpi
arch_lib=lib/$(gcc -print-multiarch)
mkdir -p "$mpi/bin" "$mpi/$arch_lib" "$mpi/share" "$mpi/libs"
cp -L /usr/bin/orterun /usr/bin/orted "$mpi/bin/"
ln -sf orterun "$mpi/bin/mpirun"
cp -rL "/usr/$arch_lib/openmpi" "$mpi/$arch_lib/"
rm -rf "$mpi/$arch_lib/openmpi/include"
cp -r /usr/share/openmpi "$mpi/share/"
# libmpi and what it and orted load that the GPU machine lacks (hwloc, libevent, ...).
ldd "$root/.gpu/bin/libddp_train_mpi.so" "$mpi/bin/orted" | awk '/=>/ {print $3}' | sort -u |
  grep -vE '/(libc|libm|libdl|librt|libpthread|libgcc_s|libstdc\+\+|libz|libudev)\.so' |
  while read -r lib; do [ -f "$lib" ] && cp -L "$lib" "$mpi/libs/"; done
du -sh "$root/.gpu" "$mpi"
