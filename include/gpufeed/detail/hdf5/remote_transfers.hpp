// gpufeed — what an hdf5_source's URL shards' requests came to so far: the transfer counters of
// every opened shard read over HTTP(S) (detail/remote/transfer_stats.hpp), summed. Shards named
// by paths, and shards not opened yet, add nothing; neither do the short-lived readers that learn
// a later shard's extent at construction (read_extent). Without the remote component every
// figure is 0.
#pragma once

#include <cstddef>

#include "gpufeed/detail/hdf5/source_state.hpp"
#include "gpufeed/detail/remote/transfer_stats.hpp"
#ifdef GPUFEED_HAS_REMOTE
#include "gpufeed/detail/remote/http_file.hpp"
#endif

namespace gpufeed::detail::hdf5 {

// a += b, counter by counter.
inline void add_transfers(remote::transfer_stats& a, const remote::transfer_stats& b) noexcept {
  a.requests += b.requests;
  a.bytes += b.bytes;
  a.retries += b.retries;
  a.short_bodies += b.short_bodies;
  a.failures += b.failures;
  a.latency_us_sum += b.latency_us_sum;
  for (std::size_t k = 0; k < remote::latency_buckets; ++k) a.latency_us[k] += b.latency_us[k];
}

// Thread-safe (the counters are atomics; an opened shard's reader stays for the source's life).
[[nodiscard]] inline remote::transfer_stats remote_transfers(const source_state& st) noexcept {
  remote::transfer_stats sum;
#ifdef GPUFEED_HAS_REMOTE
  for (std::size_t k = 0; k < st.shard_count(); ++k)
    if (const shard_index* s = st.space.if_open(k))
      if (const auto* f = s->file ? s->file.as<remote::http_file>() : nullptr)
        add_transfers(sum, f->stats());
#else
  (void)st;
#endif
  return sum;
}

}  // namespace gpufeed::detail::hdf5
