// gpufeed — what a decoding source reports about its decoded-chunk work (a leaf vocabulary
// header: hdf5_source fills it, the loader copies it into loader_stats::decode, the verdict reads
// it).
#pragma once

#include <cstddef>
#include <cstdint>

namespace gpufeed {

struct decode_stats {
  std::uint64_t chunks_decoded = 0;   // chunks read and inflated (into the cache or a record)
  std::uint64_t decoded_bytes = 0;    // bytes those chunks inflated to
  std::uint64_t records = 0;          // records read from chunked storage
  std::uint64_t delivered_bytes = 0;  // bytes of those records
  std::uint64_t cache_hits = 0;       // chunk reads served by an already decoded chunk
  std::uint64_t cache_waits = 0;      // of those, reads that waited for another worker's decode
  double cache_wait_seconds = 0;      // the time those reads waited, summed over readers
  double cache_lock_wait_seconds = 0;  // time readers waited for the cache's lock, summed
  std::uint64_t uncached_decodes = 0;  // decodes that found no room in the budget (every cached
                                       // chunk in use): decoded for one record, then dropped
  std::uint64_t decoded_ahead = 0;     // of chunks_decoded, those decoded ahead of their reads
                                       // (block_shuffled: the next window's, by idle workers)
  std::size_t cache_peak_bytes = 0;    // most decoded bytes held at once
  std::size_t cache_budget_bytes = 0;  // the cache's byte budget (hdf5_options or automatic)
  std::size_t scratch_peak_bytes = 0;  // most bytes of readers' decode scratch held at once
                                       // (counted in the budget and cache_peak_bytes)

  // Decoded bytes per delivered byte: how many rows of chunk data each delivered row inflated
  // (1 = every decoded byte was delivered once; 0 when nothing was delivered).
  [[nodiscard]] double amplification() const noexcept {
    return delivered_bytes ? static_cast<double>(decoded_bytes) /
                                 static_cast<double>(delivered_bytes)
                           : 0.0;
  }
};

// The counters of `now` accumulated since `before` (peaks and budget are taken from `now`).
inline decode_stats since(const decode_stats& now, const decode_stats& before) noexcept {
  decode_stats d = now;
  d.chunks_decoded -= before.chunks_decoded;
  d.decoded_bytes -= before.decoded_bytes;
  d.records -= before.records;
  d.delivered_bytes -= before.delivered_bytes;
  d.cache_hits -= before.cache_hits;
  d.cache_waits -= before.cache_waits;
  d.cache_wait_seconds -= before.cache_wait_seconds;
  d.cache_lock_wait_seconds -= before.cache_lock_wait_seconds;
  d.uncached_decodes -= before.uncached_decodes;
  d.decoded_ahead -= before.decoded_ahead;
  return d;
}

}  // namespace gpufeed
