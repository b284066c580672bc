// gpufeed — what a source's remote reads came to (a leaf vocabulary header: hdf5_source fills it
// for shards named by URLs, the loader copies it into loader_stats::remote, the verdict reads
// it). Counts and times only: no URL, credential or signature is ever part of it.
#pragma once

#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <string>

namespace gpufeed {

// Request latencies by power of two: bucket k counts requests that took [2^k, 2^(k+1))
// microseconds (bucket 0 also those under 1 us; the last also all longer).
inline constexpr std::size_t remote_latency_buckets = 26;

struct remote_stats {
  bool remote = false;               // the source reads some shard over HTTP(S) or S3
  std::uint64_t requests = 0;        // HTTP requests made (each attempt, opening probes too)
  std::uint64_t bytes_fetched = 0;   // response body bytes received
  std::uint64_t bytes_delivered = 0; // bytes the shards' reads took from the remote readers
  std::uint64_t retries = 0;         // attempts made again after a transient failure
  std::uint64_t failures = 0;        // reads that failed for good (an error to the reader)
  std::uint64_t short_bodies = 0;    // responses that ended early (continued from there)
  std::uint64_t unit_fetches = 0;    // whole remote units fetched (one ranged GET each)
  std::uint64_t unit_prefetches = 0; // of those, fetched ahead of their reads (read-ahead)
  std::uint64_t unit_hits = 0;       // reads served from a unit already held
  double request_seconds = 0;        // request latencies summed (read-ahead's included)
  double read_wait_seconds = 0;      // time reading threads waited on requests (not read-ahead)
  std::array<std::uint64_t, remote_latency_buckets> latency_us{};

  // The latency in microseconds under which a fraction q (0..1) of requests finished: the upper
  // edge of the histogram bucket that holds the q-quantile (0 before any request).
  [[nodiscard]] double latency_quantile_us(double q) const noexcept {
    std::uint64_t n = 0;
    for (const std::uint64_t c : latency_us) n += c;
    if (n == 0) return 0;
    const double want = q * static_cast<double>(n);
    std::uint64_t seen = 0;
    for (std::size_t k = 0; k < remote_latency_buckets; ++k) {
      seen += latency_us[k];
      if (static_cast<double>(seen) >= want && seen > 0)
        return static_cast<double>(std::uint64_t{1} << (k + 1));
    }
    return static_cast<double>(std::uint64_t{1} << remote_latency_buckets);
  }
  [[nodiscard]] double latency_p50_us() const noexcept { return latency_quantile_us(0.5); }
  [[nodiscard]] double latency_p99_us() const noexcept { return latency_quantile_us(0.99); }
  // Bytes fetched per byte delivered (1: every fetched byte was used once; 0 before any).
  [[nodiscard]] double fetch_ratio() const noexcept {
    return bytes_delivered ? static_cast<double>(bytes_fetched) /
                                 static_cast<double>(bytes_delivered)
                           : 0.0;
  }
};

// The counters of `now` accumulated since `before`.
inline remote_stats since(const remote_stats& now, const remote_stats& before) noexcept {
  remote_stats d = now;
  d.requests -= before.requests;
  d.bytes_fetched -= before.bytes_fetched;
  d.bytes_delivered -= before.bytes_delivered;
  d.retries -= before.retries;
  d.failures -= before.failures;
  d.short_bodies -= before.short_bodies;
  d.unit_fetches -= before.unit_fetches;
  d.unit_prefetches -= before.unit_prefetches;
  d.unit_hits -= before.unit_hits;
  d.request_seconds -= before.request_seconds;
  d.read_wait_seconds -= before.read_wait_seconds;
  for (std::size_t k = 0; k < remote_latency_buckets; ++k) d.latency_us[k] -= before.latency_us[k];
  return d;
}

// One line for text stats output: "remote: 120 requests, 480.0 MB fetched for 478.2 MB
// delivered (1.00 x), 0 retries, 0 failures, 0 short bodies, latency p50 2048 us p99 8192 us,
// units 115 fetched (100 ahead) 90000 hits".
inline std::string to_text(const remote_stats& r) {
  const auto n = [](std::uint64_t v) { return std::to_string(v); };
  const auto mb = [](std::uint64_t v) {
    const std::string s = std::to_string(static_cast<double>(v) / 1e6);
    return s.substr(0, s.find('.') + 2);
  };
  const auto ratio = std::to_string(r.fetch_ratio());
  return "remote: " + n(r.requests) + " requests, " + mb(r.bytes_fetched) + " MB fetched for " +
         mb(r.bytes_delivered) + " MB delivered (" + ratio.substr(0, ratio.find('.') + 3) +
         " x), " + n(r.retries) + " retries, " + n(r.failures) + " failures, " +
         n(r.short_bodies) + " short bodies, latency p50 " +
         n(static_cast<std::uint64_t>(r.latency_p50_us())) + " us p99 " +
         n(static_cast<std::uint64_t>(r.latency_p99_us())) + " us, units " + n(r.unit_fetches) +
         " fetched (" + n(r.unit_prefetches) + " ahead) " + n(r.unit_hits) + " hits";
}

// Sources that report remote reads: s.remote_stats() -> remote_stats (remote false when every
// shard is local).
template <class S>
concept remote_stats_source = requires(const S& s) {
  { s.remote_stats() } -> std::convertible_to<remote_stats>;
};

}  // namespace gpufeed
