// gpufeed — pack(): which record goes into which shard, and the batches the readers fill (part of
// gpufeed/pack/pack.hpp).
//
// Every decision here depends only on the input sizes and the options, never on thread count or
// timing: that is what makes the output byte-identical from run to run.
//
// A shard's records form one byte stream (the HDF5 `data` dataset; the LMDB values in key
// order). A batch is a byte range of that stream, so a batch's memory is bounded whatever the
// file sizes: a large file is read in pieces by several batches, a batch of small files holds
// many whole files. 0-byte records belong to the batch their offset falls in (the last batch
// when they end the shard); a shard of only 0-byte records has one empty batch. For compressed
// shards, batches are whole chunks, so each worker compresses the chunks it read; for the fixed
// layout (rows of one size), batches are whole rows.
#pragma once

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "gpufeed/error.hpp"

namespace gpufeed::detail::pack {

struct shard_plan {
  std::uint64_t first_record = 0, records = 0, bytes = 0;
  std::uint64_t chunk = 0;  // chunk bytes when compressed (0: contiguous)
  std::size_t first_batch = 0, batches = 0;
};

struct batch_plan {
  std::size_t shard = 0;
  std::uint64_t begin = 0, end = 0;                // byte range of the shard's stream
  std::uint64_t first_record = 0, end_record = 0;  // global records [first, end) it holds part of
};

struct pack_plan {
  std::vector<std::uint64_t> sizes;   // per record
  std::vector<std::uint64_t> offset;  // per record: where it starts in its shard's stream
  std::vector<shard_plan> shards;
  std::vector<batch_plan> batches;
  std::uint64_t total_bytes = 0;

  [[nodiscard]] std::uint64_t end_of(std::uint64_t r) const { return offset[r] + sizes[r]; }
};

// The size of an input file, following symlinks; io_error naming it when it cannot be stat'ed
// or is not a regular file (a FIFO or device would block or never end).
inline std::uint64_t input_size(const std::filesystem::path& p) {
  struct stat st {};
  if (::stat(p.c_str(), &st) != 0)
    throw io_error("cannot read input file", os_call_context(p.string(), "stat", errno));
  if (!S_ISREG(st.st_mode)) {
    throw io_error("input is not a regular file", file_context(p.string()));
  }
  return static_cast<std::uint64_t>(st.st_size);
}

// Greedy shards: a shard takes records in order while its bytes stay within shard_bytes (a
// record larger than that gets a shard of its own). batch_target: bytes per batch; chunk: the
// chunk size of compressed shards (0 for none), capped at each shard's size; batches are whole
// chunks then, else multiples of `align` (the row size of the fixed layout; chunk is one too).
inline pack_plan make_plan(std::vector<std::uint64_t> sizes, std::uint64_t shard_bytes,
                           std::uint64_t batch_target, std::uint64_t chunk,
                           std::uint64_t align = 1) {
  pack_plan p;
  p.sizes = std::move(sizes);
  const std::uint64_t n = p.sizes.size();
  p.offset.resize(n);
  for (std::uint64_t r = 0; r < n; ++r) {
    if (p.shards.empty() ||
        (p.shards.back().records > 0 && p.shards.back().bytes + p.sizes[r] > shard_bytes)) {
      shard_plan s;
      s.first_record = r;
      p.shards.push_back(s);
    }
    shard_plan& s = p.shards.back();
    p.offset[r] = s.bytes;
    s.bytes += p.sizes[r];
    ++s.records;
    p.total_bytes += p.sizes[r];
  }
  for (std::size_t si = 0; si < p.shards.size(); ++si) {
    shard_plan& s = p.shards[si];
    s.chunk = (chunk && s.bytes) ? std::min(chunk, s.bytes) : 0;
    std::uint64_t step = std::max<std::uint64_t>(batch_target / align, 1) * align;
    if (s.chunk) step = s.chunk * std::max<std::uint64_t>(1, batch_target / s.chunk);
    const std::uint64_t count = std::max<std::uint64_t>(1, (s.bytes + step - 1) / step);
    s.first_batch = p.batches.size();
    s.batches = static_cast<std::size_t>(count);
    const std::uint64_t end_record = s.first_record + s.records;
    std::uint64_t lo = s.first_record;
    for (std::uint64_t k = 0; k < count; ++k) {
      batch_plan b;
      b.shard = si;
      b.begin = k * step;
      b.end = std::min(s.bytes, b.begin + step);
      // First record that ends past begin, or (0 bytes) starts at or after it.
      while (lo < end_record && p.end_of(lo) <= b.begin && p.offset[lo] < b.begin) ++lo;
      std::uint64_t hi = lo;
      if (k + 1 == count) {
        hi = end_record;
      } else {
        while (hi < end_record && p.offset[hi] < b.end) ++hi;
      }
      b.first_record = lo;
      b.end_record = hi;
      p.batches.push_back(b);
    }
  }
  return p;
}

// The record order of a shuffled pack: a Fisher-Yates permutation of 0..n-1 driven by
// splitmix64(seed), each draw bounded without bias (rejection, then the remainder). Written out
// rather than std::shuffle + std::mt19937_64 because std::shuffle's use of the generator differs
// between standard libraries: this order is the same everywhere for the same (n, seed).
inline std::vector<std::uint64_t> shuffled_order(std::uint64_t n, std::uint64_t seed) {
  std::vector<std::uint64_t> order(static_cast<std::size_t>(n));
  for (std::uint64_t i = 0; i < n; ++i) order[i] = i;
  std::uint64_t state = seed;
  const auto next = [&state] {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  };
  for (std::uint64_t i = n; i > 1; --i) {
    // j uniform in [0, i): reject the 2^64 mod i lowest draws, then take the remainder.
    const std::uint64_t reject_below = (0 - i) % i;
    std::uint64_t x = next();
    while (x < reject_below) x = next();
    const std::uint64_t j = x % i;
    std::swap(order[i - 1], order[j]);
  }
  return order;
}

// Record i holds input record_order(...)[i]: the shuffled order, or the inputs' own.
inline std::vector<std::uint64_t> record_order(std::uint64_t n, bool shuffle, std::uint64_t seed) {
  if (shuffle) return shuffled_order(n, seed);
  std::vector<std::uint64_t> order(static_cast<std::size_t>(n));
  for (std::uint64_t i = 0; i < n; ++i) order[i] = i;
  return order;
}

}  // namespace gpufeed::detail::pack
