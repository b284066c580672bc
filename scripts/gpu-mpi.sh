# Sourced on the GPU machine (by gpu-ddp.sh and gpu-delivery.sh in the bundle folder): the Open
# MPI that scripts/ddp-bundle.sh copied into the bundle's openmpi/, relocated by OPAL_PREFIX (its PMIx by
# PMIX_INSTALL_PREFIX), on PATH and LD_LIBRARY_PATH; and NVLink multicast kept off (it can take
# shared GPUs out of service on these machines). Needs $here: the bundle folder.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mpi=$here/openmpi
export OPAL_PREFIX=$mpi PMIX_INSTALL_PREFIX=$mpi/pmix2 PATH=$mpi/bin:$PATH
export LD_LIBRARY_PATH=$(echo "$mpi"/lib/*/openmpi/lib):$mpi/pmix2/lib:$mpi/libs:$LD_LIBRARY_PATH
export OMPI_MCA_btl_vader_single_copy_mechanism=none PMIX_MCA_mca_base_component_path=$mpi/pmix2/lib/pmix
mpirun_=(mpirun --allow-run-as-root --oversubscribe -np)
