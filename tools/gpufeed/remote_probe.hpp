// The gpufeed CLI's remote measurements, shared by bench and doctor for DATA given as a URL
// (http://, https://, s3://, or a pack's manifest.json there): the shards' URLs, the request
// figures of a loader run (the source's remote counters, hdf5_source::remote_stats), and
// the raw ranged-GET rates of the objects, one stream and several at once, read through the
// library's own HTTP reader (detail/remote/object_source.hpp) so that they are what the loader's
// requests can reach. Nothing here prints a URL unredacted or a credential.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gpufeed/detail/hdf5/manifest_url.hpp"
#include "gpufeed/detail/remote/object_source.hpp"
#include "gpufeed/detail/remote/transfer_stats.hpp"
#include "gpufeed/detail/remote/url.hpp"
#include "gpufeed/remote_stats.hpp"

namespace gpufeed::cli {

namespace rem = gpufeed::detail::remote;

[[nodiscard]] inline bool is_url(const std::string& data) { return rem::is_remote_url(data); }

// The shard URLs DATA stands for: a manifest.json URL's shards, else the one URL.
[[nodiscard]] inline std::vector<std::filesystem::path> url_shards(const std::string& data) {
  return detail::hdf5::expand_manifest_url({std::filesystem::path(data)}, "hdf5");
}

// The q-quantile (0..1) of the request latencies in milliseconds, from the power-of-two
// histogram: linear within the bucket that holds it, so good to a factor of two at worst.
[[nodiscard]] inline double latency_quantile_ms(const remote_stats& s, double q) {
  std::uint64_t n = 0;
  for (const auto c : s.latency_us) n += c;
  if (n == 0) return 0;
  const double want = q * static_cast<double>(n);
  double seen = 0;
  for (std::size_t k = 0; k < remote_latency_buckets; ++k) {
    const double c = static_cast<double>(s.latency_us[k]);
    if (c > 0 && seen + c >= want) {
      const double lo = k == 0 ? 0.0 : static_cast<double>(std::uint64_t{1} << k);
      const double hi = static_cast<double>(std::uint64_t{1} << (k + 1));
      return (lo + (hi - lo) * (want - seen) / c) / 1000.0;
    }
    seen += c;
  }
  return static_cast<double>(std::uint64_t{1} << remote_latency_buckets) / 1000.0;
}

// The sizes of the objects at `urls` (one opening request each): the dataset's bytes.
[[nodiscard]] inline std::uint64_t object_bytes(const std::vector<std::filesystem::path>& urls) {
  std::uint64_t total = 0;
  for (const auto& u : urls) total += rem::open_remote_object(u.native())->size();
  return total;
}

// Raw ranged-GET rates over the objects (no decoding): latency of 1-byte GETs, then one stream
// of `block`-sized GETs, then `streams` threads at once, each pass for about a third of
// `seconds` and at most `max_bytes`.
struct ranged_rates {
  std::uint64_t object_size = 0;  // the first object's
  std::size_t objects = 0, block = 0, streams = 0;
  double latency_p50_ms = 0, latency_p99_ms = 0;
  std::size_t latency_samples = 0;
  std::uint64_t single_bytes = 0, parallel_bytes = 0;
  double single_gbps = 0, parallel_gbps = 0;
  std::uint64_t retries = 0;
};

namespace detail_remote {

// Reads `block`-sized ranges from offset `start` on (wrapping round the objects), until `stop`
// or `budget` bytes are counted in `done`; returns its own bytes. Throws the reader's io_error.
inline std::uint64_t read_ranges(const std::vector<std::unique_ptr<rem::http_file>>& objects,
                                 std::size_t block, std::uint64_t start,
                                 std::chrono::steady_clock::time_point stop, std::uint64_t budget,
                                 std::atomic<std::uint64_t>& done) {
  std::vector<char> buf(block);
  std::uint64_t mine = 0, at = start;
  while (std::chrono::steady_clock::now() < stop && done.load() < budget) {
    const rem::http_file& f = *objects[(at / block) % objects.size()];
    const std::uint64_t size = f.size();
    const std::uint64_t off = size > block ? (at % (size - block + 1)) / 4096 * 4096 : 0;
    const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(block, size - off));
    if (n == 0) break;
    f.read_exact(buf.data(), n, off);
    mine += n;
    done += n;
    at += block;
  }
  return mine;
}

}  // namespace detail_remote

// io_error (the reader's, naming the URL redacted) when an object cannot be opened or read.
[[nodiscard]] inline ranged_rates measure_ranged_gets(const std::vector<std::filesystem::path>& urls,
                                                      double seconds, std::uint64_t max_bytes,
                                                      std::size_t streams) {
  using clock = std::chrono::steady_clock;
  ranged_rates r;
  std::vector<std::unique_ptr<rem::http_file>> objects;
  for (std::size_t k = 0; k < urls.size() && k < 8; ++k)
    objects.push_back(rem::open_remote_object(urls[k].native()));
  r.objects = objects.size();
  r.object_size = objects.front()->size();
  r.streams = std::max<std::size_t>(1, streams);
  r.block = static_cast<std::size_t>(std::clamp<std::uint64_t>(r.object_size, 1, std::uint64_t{8} << 20));
  // Latency: 1-byte GETs at spread offsets, one at a time.
  std::vector<double> ms;
  char one = 0;
  const auto lat_stop = clock::now() + std::chrono::duration_cast<clock::duration>(
                                          std::chrono::duration<double>(std::min(1.0, seconds / 6)));
  for (std::uint64_t i = 0; ms.size() < 200 && (ms.size() < 5 || clock::now() < lat_stop); ++i) {
    const rem::http_file& f = *objects[i % objects.size()];
    const auto t0 = clock::now();
    f.read_exact(&one, 1, (i * 7919 * 4096) % std::max<std::uint64_t>(1, f.size()));
    ms.push_back(std::chrono::duration<double, std::milli>(clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  r.latency_samples = ms.size();
  r.latency_p50_ms = ms[ms.size() / 2];
  r.latency_p99_ms = ms[std::min(ms.size() - 1, ms.size() * 99 / 100)];
  // One stream, then `streams` at once.
  const auto pass = [&](std::size_t threads, std::uint64_t& bytes, double& gbps) {
    std::atomic<std::uint64_t> done{0};
    const auto t0 = clock::now();
    const auto stop = t0 + std::chrono::duration_cast<clock::duration>(
                               std::chrono::duration<double>(seconds / 3));
    std::vector<std::thread> pool;
    std::vector<std::exception_ptr> failed(threads);
    for (std::size_t t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        try {
          (void)detail_remote::read_ranges(objects, r.block, t * r.block * 7, stop, max_bytes, done);
        } catch (...) {
          failed[t] = std::current_exception();
        }
      });
    for (auto& th : pool) th.join();
    for (auto& e : failed)
      if (e) std::rethrow_exception(e);
    bytes = done.load();
    gbps = static_cast<double>(bytes) / std::chrono::duration<double>(clock::now() - t0).count() / 1e9;
  };
  pass(1, r.single_bytes, r.single_gbps);
  pass(r.streams, r.parallel_bytes, r.parallel_gbps);
  for (const auto& o : objects) r.retries += o->stats().retries;
  return r;
}

}  // namespace gpufeed::cli
