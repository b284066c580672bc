#!/usr/bin/env bash
# Developer tool: bundles examples/ddp_train (with its MPI plugin), examples/train_loop,
# bench/compressed_bench, the gpufeed CLI and a relocatable copy of Debian's Open MPI into the
# bundle folder of gpu-bundle.sh for the GPU machine, which has the NVIDIA driver, CUDA, PyTorch's wheels (nvidia-nccl-cu13, nvidia-cublas) and mpi4py (whose wheels ship
# no MPI library and no mpirun), but no Open MPI. Then, there, the bundle's copies:
# bash gpu-ddp.sh [GPUS] and bash gpu-delivery.sh [GPUS].
#   cmake --build build -j2 --target ddp_train ddp_train_mpi train_loop compressed_bench gpufeed_cli
#   scripts/ddp-bundle.sh [BUILD_DIR]
# libnccl (~210 MB) and libcublas/libcublasLt (~600 MB) are too big to carry: gpu-ddp.sh finds
# the GPU machine's own copies (gpu-libs.sh). Open MPI (~28 MB with its PMIx and the transports'
# libraries) runs from the bundle's openmpi/: OPAL_PREFIX relocates it and PMIX_INSTALL_PREFIX +
# PMIX_MCA_mca_base_component_path its PMIx (gpu-ddp.sh sets them). Checked here with the
# system's Open MPI and PMIx trees hidden (unshare -m, bind mounts): a singleton and mpirun -np 2.
# The bundle is ~52 MB: carry only the bundle folder.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
ddp=$build/examples/ddp_train
bash "$root/scripts/gpu-bundle.sh" "$ddp/ddp_train" "$build/examples/train_loop" \
  "$build/bench/compressed_bench" "$build/tools/gpufeed"
cp "$ddp/libddp_train_mpi.so" "$root/.gpu/bin/"
cp "$root/scripts/gpu-ddp.sh" "$root/scripts/gpu-delivery.sh" "$root/scripts/gpu-mpi.sh" \
  "$root/scripts/gpu-libs.sh" "$root/.gpu/"
rm -f "$root"/.gpu/lib/libnccl.so* "$root"/.gpu/lib/libcublas.so* "$root"/.gpu/lib/libcublasLt.so*
# Open MPI, laid out under its own prefix as Debian installs it under /usr, and the PMIx it uses
# (its own prefix, relocated by PMIX_INSTALL_PREFIX).
mpi=$root/.gpu/openmpi
arch=$(gcc -print-multiarch)
mkdir -p "$mpi/bin" "$mpi/lib/$arch" "$mpi/share" "$mpi/libs"
cp -L /usr/bin/orterun /usr/bin/orted "$mpi/bin/"
ln -sf orterun "$mpi/bin/mpirun"
cp -rL "/usr/lib/$arch/openmpi" "$mpi/lib/$arch/"
cp -rL "/usr/lib/$arch/pmix2" "$mpi/pmix2"
rm -rf "$mpi/lib/$arch/openmpi/include" "$mpi/pmix2/include" "$mpi"/pmix2/lib/*.a
cp -r /usr/share/openmpi "$mpi/share/"
# What libmpi, orted and the components load from outside those trees (hwloc, libevent, libpmix,
# the network transports' libraries), but not the C runtime.
for f in "$root/.gpu/bin/libddp_train_mpi.so" "$mpi/bin/orted" "$mpi"/lib/"$arch"/openmpi/lib/openmpi3/*.so \
         "$mpi"/pmix2/lib/pmix/*.so; do
  ldd "$f" | awk '/=>/ {print $3}'
done | sort -u | grep -vE "/(openmpi|pmix2)/" |
  grep -vE '/(libc|libm|libdl|librt|libpthread|libgcc_s|libstdc\+\+)\.so' |
  while read -r lib; do [ -f "$lib" ] && cp -L "$lib" "$mpi/libs/"; done
du -sh "$root/.gpu" "$mpi"
