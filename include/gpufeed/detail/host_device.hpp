// gpufeed::detail — GPUFEED_HOST_DEVICE marks plain C++ functions that nvcc also compiles for
// the GPU (the chunk decoders' parse, shared by the kernels and their host tests); for any other
// compiler it is nothing. No CUDA header.
#pragma once

#if defined(__CUDACC__)
#define GPUFEED_HOST_DEVICE __host__ __device__
#else
#define GPUFEED_HOST_DEVICE
#endif
