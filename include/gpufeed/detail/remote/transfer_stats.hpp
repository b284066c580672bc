// gpufeed — what a remote object's requests came to: counters every reading thread adds to
// (relaxed atomics: each is a tally on its own, read as a snapshot that may be a moment apart
// between counters), and the snapshot a stats() call returns.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>

#include "gpufeed/remote_stats.hpp"

namespace gpufeed::detail::remote {

// Request latencies by power of two: bucket k counts requests that took [2^k, 2^(k+1))
// microseconds (bucket 0 also those under 1 us; the last also all longer).
inline constexpr std::size_t latency_buckets = 26;  // the last starts at 2^25 us, about 34 s

struct transfer_stats {
  std::uint64_t requests = 0;     // HTTP requests made (each attempt, the opening probe too)
  std::uint64_t bytes = 0;        // body bytes delivered into readers' buffers
  std::uint64_t retries = 0;      // attempts made again after a transient failure
  std::uint64_t short_bodies = 0; // reads that ended early with some bytes (continued by the seam)
  std::uint64_t failures = 0;     // reads that failed for good (an error to the reader)
  std::uint64_t latency_us_sum = 0;  // over every request, failed or not
  std::array<std::uint64_t, latency_buckets> latency_us{};

  // The mean request latency in microseconds (0 before any request).
  [[nodiscard]] double mean_latency_us() const noexcept {
    return requests ? static_cast<double>(latency_us_sum) / static_cast<double>(requests) : 0.0;
  }
};

class transfer_counters {
 public:
  void request(std::chrono::steady_clock::duration took) noexcept {
    const auto us = std::chrono::duration_cast<std::chrono::microseconds>(took).count();
    const std::uint64_t u = us > 0 ? static_cast<std::uint64_t>(us) : 0;
    std::size_t k = 0;
    while (k + 1 < latency_buckets && (u >> (k + 1)) != 0) ++k;
    requests_.fetch_add(1, std::memory_order_relaxed);
    latency_sum_.fetch_add(u, std::memory_order_relaxed);
    latency_[k].fetch_add(1, std::memory_order_relaxed);
  }
  void bytes(std::uint64_t n) noexcept { bytes_.fetch_add(n, std::memory_order_relaxed); }
  void retry() noexcept { retries_.fetch_add(1, std::memory_order_relaxed); }
  void short_body() noexcept { short_bodies_.fetch_add(1, std::memory_order_relaxed); }
  void failure() noexcept { failures_.fetch_add(1, std::memory_order_relaxed); }

  [[nodiscard]] transfer_stats snapshot() const noexcept {
    transfer_stats s;
    s.requests = requests_.load(std::memory_order_relaxed);
    s.bytes = bytes_.load(std::memory_order_relaxed);
    s.retries = retries_.load(std::memory_order_relaxed);
    s.short_bodies = short_bodies_.load(std::memory_order_relaxed);
    s.failures = failures_.load(std::memory_order_relaxed);
    s.latency_us_sum = latency_sum_.load(std::memory_order_relaxed);
    for (std::size_t k = 0; k < latency_buckets; ++k)
      s.latency_us[k] = latency_[k].load(std::memory_order_relaxed);
    return s;
  }

 private:
  std::atomic<std::uint64_t> requests_{0};
  std::atomic<std::uint64_t> bytes_{0};
  std::atomic<std::uint64_t> retries_{0};
  std::atomic<std::uint64_t> short_bodies_{0};
  std::atomic<std::uint64_t> failures_{0};
  std::atomic<std::uint64_t> latency_sum_{0};
  std::array<std::atomic<std::uint64_t>, latency_buckets> latency_{};
};

static_assert(latency_buckets == remote_latency_buckets);

// Copies what `t` counts into the request fields of `r` (remote_stats.hpp).
inline void copy_transfers(const transfer_stats& t, remote_stats& r) noexcept {
  r.requests = t.requests;
  r.bytes_fetched = t.bytes;
  r.retries = t.retries;
  r.failures = t.failures;
  r.short_bodies = t.short_bodies;
  r.request_seconds = static_cast<double>(t.latency_us_sum) / 1e6;
  r.latency_us = t.latency_us;
}

}  // namespace gpufeed::detail::remote
