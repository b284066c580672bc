// gpufeed::detail — the units the block_shuffled order permutes: contiguous record ranges, found
// once per loader from the source.
//
// A unit never splits a decode unit (records decoded together: for a compressed HDF5 shard, the
// band of chunks that covers the same rows) and holds at least one storage block of records
// (storage_block_bytes), so that
//   - a compressed source's unit is its band of chunks, or several small bands read back to back;
//   - an uncompressed source (contiguous HDF5, LMDB), whose records decode alone, gets blocks of
//     contiguous records large enough that reading one is a sequential read.
// Building costs O(units) decode_unit() calls plus a galloping search through units larger than a
// block, which relies on the decode_unit_source contract that records sharing a unit are
// consecutive. record_units itself is public vocabulary (gpufeed/sample_order.hpp).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "gpufeed/sample_order.hpp"
#include "gpufeed/source.hpp"

namespace gpufeed {
namespace detail {

// A storage block: 1 MiB of contiguous records. Requests of 1 MiB run an NVMe SSD at its
// sequential rate (the per-request cost, ~10-20 us, is < 5 % of the ~300 us a 1 MiB transfer
// takes at 3 GB/s) and match the kernel's usual request size limit (max_sectors_kb 512-1280),
// while 16 KiB random reads ran at a third of the sequential rate (docs/design.md, "HDF5
// compressed chunks", read-ahead). Smaller blocks lose that; larger ones only coarsen the order.
inline constexpr std::size_t storage_block_bytes = std::size_t{1} << 20;

// Records per storage block for records of `record_bytes` on average (at least 1).
inline std::uint64_t block_records(std::size_t record_bytes) noexcept {
  return std::max<std::uint64_t>(1, storage_block_bytes / std::max<std::size_t>(1, record_bytes));
}

// One past the last record of the decode unit that holds `i` (records i.. share its value).
template <decode_unit_source S>
std::uint64_t decode_unit_end(const S& src, std::uint64_t i, std::uint64_t n) {
  const std::uint64_t v = src.decode_unit(i);
  std::uint64_t lo = i, step = 1;  // decode_unit(lo) == v
  while (lo + step < n && static_cast<std::uint64_t>(src.decode_unit(lo + step)) == v) {
    lo += step;
    step *= 2;
  }
  std::uint64_t hi = std::min(n, lo + step);  // first index known or assumed != v
  while (hi - lo > 1) {
    const std::uint64_t mid = lo + (hi - lo) / 2;
    if (static_cast<std::uint64_t>(src.decode_unit(mid)) == v)
      lo = mid;
    else
      hi = mid;
  }
  return hi;
}

// The first record of the decode unit that holds `i`.
template <decode_unit_source S>
std::uint64_t decode_unit_begin(const S& src, std::uint64_t i) {
  const std::uint64_t v = src.decode_unit(i);
  std::uint64_t hi = i, step = 1;  // decode_unit(hi) == v
  while (step <= hi && static_cast<std::uint64_t>(src.decode_unit(hi - step)) == v) {
    hi -= step;
    step *= 2;
  }
  std::uint64_t lo = step <= hi ? hi - step : 0;  // != v unless lo == 0 and equal
  if (static_cast<std::uint64_t>(src.decode_unit(lo)) == v) return lo;
  while (hi - lo > 1) {
    const std::uint64_t mid = lo + (hi - lo) / 2;
    if (static_cast<std::uint64_t>(src.decode_unit(mid)) == v)
      hi = mid;
    else
      lo = mid;
  }
  return hi;
}

// The units of `src` for the block_shuffled order: blocks of `per_block` records, each run on to
// the end of the decode unit it would otherwise split.
template <source S>
record_units units_of(const S& src, std::uint64_t per_block) {
  const std::uint64_t n = src.size();
  per_block = std::max<std::uint64_t>(1, per_block);
  if constexpr (decode_unit_source<S>) {
    std::vector<std::uint64_t> starts;
    for (std::uint64_t s = 0; s < n;) {
      starts.push_back(s);
      std::uint64_t e = std::min(n, s + per_block);
      if (e < n && static_cast<std::uint64_t>(src.decode_unit(e - 1)) ==
                       static_cast<std::uint64_t>(src.decode_unit(e)))
        e = decode_unit_end(src, e, n);
      s = e;
    }
    return record_units::from_starts(std::move(starts), n);
  } else {
    return record_units::uniform(n, per_block);
  }
}

// Records per decode unit, as the median over 15 evenly spaced records of their unit's length:
// what a record read at random costs in decoding, in records. 1 for sources without decode units.
template <source S>
double records_per_decode_unit(const S& src) {
  if constexpr (decode_unit_source<S>) {
    const std::uint64_t n = src.size();
    if (n == 0) return 1;
    std::vector<std::uint64_t> lengths;
    for (std::uint64_t k = 0; k < 15; ++k) {
      const std::uint64_t i = n * (2 * k + 1) / 30;
      lengths.push_back(decode_unit_end(src, i, n) - decode_unit_begin(src, i));
    }
    std::nth_element(lengths.begin(), lengths.begin() + 7, lengths.end());
    return static_cast<double>(lengths[7]);
  } else {
    (void)src;
    return 1;
  }
}

}  // namespace detail
}  // namespace gpufeed
