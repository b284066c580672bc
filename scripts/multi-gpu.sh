#!/usr/bin/env bash
# Multi-GPU runs of examples/ddp_train, for a machine of several GPUs of one host:
#   here:  cmake --build build -j2 --target ddp_train ddp_train_mpi train_loop compressed_bench gpufeed_cli
#          scripts/ddp-bundle.sh build
#   there (carry the bundle folder): bash scripts/multi-gpu.sh        (all the machine's GPUs)
# One process per GPU through the bundled Open MPI's mpirun:
#   gpu-delivery.sh  aggregate delivery (shuffled, block_shuffled) against the sum of the GPUs'
#                    pinned H2D rates and the host's parallel read rate, and each GPU's loader
#                    on its own NUMA node against the far one
#   gpu-ddp.sh       ddp_train: the loss curve against a 1-GPU run of the same global batch, the
#                    elastic resume 4 -> 2 / 4 -> 3 when there are 4 GPUs or more, samples/s
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
gpus=${GPUS:-$(nvidia-smi -L | grep -c '^GPU')}
status=0
bash "$root/.gpu/gpu-delivery.sh" "$gpus" || status=1
bash "$root/.gpu/gpu-ddp.sh" "$gpus" || status=1
exit $status
