// gpufeed::cuda::detail — the padding kernel behind pad.cuh.
//
// Work is split into warp tasks: (row r, chunk of 128 aligned 4-byte output words = 512 bytes),
// so short rows and a single huge row both spread over the whole GPU. A lane writes whole,
// aligned 4-byte output words (a warp store is 128 contiguous bytes); it builds each word from
// the source with two aligned 4-byte loads and a funnel shift, since records start at any byte.
// The (at most 3 + 3) bytes at a row's ends that do not fill an aligned output word, and source
// words that would reach outside the caller's [data, data + bytes), go byte by byte: the kernel
// never reads outside that range and never writes outside the output rows.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "gpufeed/cuda/detail/grid.hpp"

namespace gpufeed::cuda::detail {

inline constexpr unsigned pad_chunk_words = 128;  // output words per warp task (4 per lane)

struct pad_args {
  const unsigned char* data = nullptr;
  std::uint64_t data_bytes = 0;
  const std::uint64_t* offsets = nullptr;  // records + 1
  std::uint64_t records = 0;
  unsigned char* out = nullptr;
  std::uint32_t* lengths = nullptr;        // may be null
  std::uint64_t max_len = 0;               // elements per row
  std::uint64_t row_bytes = 0;             // max_len * element bytes
  std::uint64_t chunks_per_row = 1;
  std::uint64_t pad64 = 0;                 // the pad element repeated to fill 8 bytes
  unsigned long long* truncated = nullptr;
  unsigned long long* malformed = nullptr;
  unsigned long long* first_malformed_inv = nullptr;
};

// Record r's length in elements of 2^shift bytes, untruncated. A record whose offsets decrease or
// reach past data_bytes is malformed and has length 0; one whose byte count is not a multiple of
// the element size is malformed and keeps its whole elements.
__host__ __device__ inline std::uint64_t record_elements(const std::uint64_t* offsets,
                                                         std::uint64_t r, std::uint64_t data_bytes,
                                                         unsigned shift, bool& malformed) {
  const std::uint64_t b = offsets[r];
  const std::uint64_t e = offsets[r + 1];
  if (e < b || e > data_bytes) {
    malformed = true;
    return 0;
  }
  malformed = ((e - b) & ((std::uint64_t{1} << shift) - 1)) != 0;
  return (e - b) >> shift;
}

// Record lengths for cub::DeviceReduce::Max (through a transform iterator over record indices).
struct record_length_op {
  const std::uint64_t* offsets = nullptr;
  std::uint64_t data_bytes = 0;
  unsigned shift = 0;
  __host__ __device__ std::uint64_t operator()(std::uint64_t r) const {
    bool malformed = false;
    return record_elements(offsets, r, data_bytes, shift, malformed);
  }
};

// The pad pattern's byte at row column col (rows start on an element boundary and the element
// size divides 8, so the pattern repeats every 8 bytes).
__device__ __forceinline__ unsigned pad_byte(std::uint64_t pad64, std::uint64_t col) {
  return static_cast<unsigned>(pad64 >> (8 * (col & 7))) & 0xffu;
}
__device__ __forceinline__ std::uint32_t pad_word(std::uint64_t pad64, std::uint64_t col) {
  const unsigned s = static_cast<unsigned>(col & 7) * 8;
  return static_cast<std::uint32_t>(s == 0 ? pad64 : (pad64 >> s) | (pad64 << (64 - s)));
}

// Byte col of a row whose first n bytes come from src.
__device__ __forceinline__ unsigned row_byte(std::uintptr_t src, std::uint64_t n,
                                             std::uint64_t pad64, std::uint64_t col) {
  return col < n ? static_cast<unsigned>(__ldg(reinterpret_cast<const unsigned char*>(src + col)))
                 : pad_byte(pad64, col);
}

// Bytes col..col+3 of such a row, little-endian. Aligned loads only inside [begin, end).
__device__ __forceinline__ std::uint32_t row_word(std::uintptr_t src, std::uint64_t n,
                                                  std::uint64_t pad64, std::uint64_t col,
                                                  std::uintptr_t begin, std::uintptr_t end) {
  if (col + 4 <= n) {
    const std::uintptr_t s = src + col;
    const std::uintptr_t a = s & ~std::uintptr_t{3};
    const unsigned shift = static_cast<unsigned>(s & 3) * 8;
    if (shift == 0) return __ldg(reinterpret_cast<const std::uint32_t*>(a));
    if (a >= begin && a + 8 <= end)
      return __funnelshift_r(__ldg(reinterpret_cast<const std::uint32_t*>(a)),
                             __ldg(reinterpret_cast<const std::uint32_t*>(a + 4)), shift);
  } else if (col >= n) {
    return pad_word(pad64, col);
  }
  std::uint32_t w = 0;
#pragma unroll
  for (unsigned k = 0; k < 4; ++k) w |= row_byte(src, n, pad64, col + k) << (8 * k);
  return w;
}

// ElementShift = log2(element bytes). Counters are summed per block in shared memory and added to
// the global ones once per block, so heavy truncation does not serialise on one address.
template <unsigned ElementShift>
__global__ void __launch_bounds__(transform_threads) pad_kernel(pad_args p) {
  __shared__ unsigned long long block_truncated, block_malformed, block_first_inv;
  if (threadIdx.x == 0) {
    block_truncated = 0;
    block_malformed = 0;
    block_first_inv = 0;
  }
  __syncthreads();

  const unsigned lane = threadIdx.x % 32;
  const std::uint64_t warps = std::uint64_t{gridDim.x} * (blockDim.x / 32);
  const std::uint64_t tasks = p.records * p.chunks_per_row;
  const std::uintptr_t begin = reinterpret_cast<std::uintptr_t>(p.data);
  const std::uintptr_t end = begin + p.data_bytes;
  const std::uintptr_t out = reinterpret_cast<std::uintptr_t>(p.out);
  unsigned long long truncated = 0, malformed_count = 0, first_inv = 0;

  for (std::uint64_t t = (std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x) / 32; t < tasks;
       t += warps) {
    const std::uint64_t r = t / p.chunks_per_row;
    const std::uint64_t chunk = t - r * p.chunks_per_row;
    bool malformed = false;
    const std::uint64_t len = record_elements(p.offsets, r, p.data_bytes, ElementShift, malformed);
    const std::uint64_t kept = len < p.max_len ? len : p.max_len;
    const std::uint64_t n = kept << ElementShift;  // bytes copied from the record
    const std::uintptr_t src = begin + p.offsets[r];  // dereferenced only below n
    const std::uintptr_t row = out + r * p.row_bytes;
    const std::uintptr_t row_end = row + p.row_bytes;
    const std::uintptr_t w0 = (row + 3) & ~std::uintptr_t{3};  // first whole output word
    const std::uintptr_t w1 = row_end & ~std::uintptr_t{3};    // end of the whole words
    const std::uint64_t words = w1 > w0 ? (w1 - w0) / 4 : 0;

    if (chunk == 0) {
      if (lane == 0) {
        if (p.lengths != nullptr) p.lengths[r] = static_cast<std::uint32_t>(kept);
        truncated += len > p.max_len ? 1 : 0;
        if (malformed) {
          ++malformed_count;
          if (~r > first_inv) first_inv = ~r;
        }
      }
      // Lanes 0-3: bytes before the first whole word; lanes 4-7: bytes after the last one.
      const std::uintptr_t head_end = w0 < row_end ? w0 : row_end;
      const std::uintptr_t tail = w1 > head_end ? w1 : head_end;
      const std::uintptr_t b = lane < 4 ? row + lane : tail + (lane - 4);
      if ((lane < 4 && b < head_end) || (lane >= 4 && lane < 8 && b < row_end))
        *reinterpret_cast<unsigned char*>(b) = static_cast<unsigned char>(row_byte(src, n, p.pad64, b - row));
    }

    // All loads first, then all stores: four words in flight per lane.
    const std::uint64_t first = chunk * pad_chunk_words + lane;
    std::uint32_t v[pad_chunk_words / 32];
#pragma unroll
    for (unsigned k = 0; k < pad_chunk_words / 32; ++k) {
      const std::uint64_t i = first + 32 * k;
      v[k] = i < words ? row_word(src, n, p.pad64, w0 + 4 * i - row, begin, end) : 0u;
    }
#pragma unroll
    for (unsigned k = 0; k < pad_chunk_words / 32; ++k) {
      const std::uint64_t i = first + 32 * k;
      if (i < words) *reinterpret_cast<std::uint32_t*>(w0 + 4 * i) = v[k];
    }
  }

  if (truncated != 0) atomicAdd(&block_truncated, truncated);
  if (malformed_count != 0) {
    atomicAdd(&block_malformed, malformed_count);
    atomicMax(&block_first_inv, first_inv);
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    if (block_truncated != 0) atomicAdd(p.truncated, block_truncated);
    if (block_malformed != 0) {
      atomicAdd(p.malformed, block_malformed);
      atomicMax(p.first_malformed_inv, block_first_inv);
    }
  }
}

// Queues the kernel; p's counters must already be zero on `stream`.
inline void launch_pad(const pad_args& p, unsigned element_shift, cudaStream_t stream) {
  const std::uint64_t tasks = p.records * p.chunks_per_row;
  const dim3 grid(grid_blocks(ceil_div(tasks, transform_threads / 32)));
  const dim3 block(transform_threads);
  switch (element_shift) {
    case 0: pad_kernel<0><<<grid, block, 0, stream>>>(p); break;
    case 1: pad_kernel<1><<<grid, block, 0, stream>>>(p); break;
    case 2: pad_kernel<2><<<grid, block, 0, stream>>>(p); break;
    default: pad_kernel<3><<<grid, block, 0, stream>>>(p); break;
  }
  check_launch("pad_kernel launch");
}

}  // namespace gpufeed::cuda::detail
