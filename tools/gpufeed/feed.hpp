// The gpufeed CLI's loader runs, shared by doctor and bench: open the shards at a path as the
// right source, and run the library's loader over them for a bounded time with the consumer
// doing no work, so the figures and the verdict describe loading alone.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "gpufeed/hdf5_source.hpp"
#include "gpufeed/lmdb_source.hpp"
#include "gpufeed/loader.hpp"
#include "gpufeed/target_choice.hpp"
#include "gpufeed/verdict.hpp"
#include "shards.hpp"
#ifdef GPUFEED_CLI_HAS_CUDA
#include <cuda_runtime_api.h>

#include "gpufeed/cuda/check.hpp"
#endif

namespace gpufeed::cli {

// The shards at `data`: a directory of shards (sorted by name), one HDF5 file, or one LMDB
// environment. `lmdb` tells which format. Empty when a directory holds none. io_error when the
// path does not exist, format_error when it is not a shard.
inline std::vector<std::filesystem::path> find_shards(const std::string& data, bool& lmdb) {
  std::vector<std::string> shards;
  if (std::filesystem::is_directory(data) &&
      !std::filesystem::exists(std::filesystem::path(data) / "data.mdb")) {
    shards = shards_under(data, lmdb);
  } else {
    lmdb = is_lmdb(data);
    shards.push_back(data);
  }
  return {shards.begin(), shards.end()};
}

// Calls f(source) with an hdf5_source or an lmdb_source over the shards; returns false (without
// calling f) when there are none.
template <class F>
bool with_source(const std::vector<std::filesystem::path>& shards, bool lmdb, F&& f) {
  if (shards.empty()) return false;
  if (lmdb)
    f(lmdb_source(shards));
  else
    f(hdf5_source(shards));
  return true;
}

struct feed_settings {
  double seconds = 3.0;
  std::size_t workers = 0, prefetch = 0;  // 0: the loader's defaults
  std::uint64_t epochs = 1;               // 0: as many as fit in `seconds`
  target where = target::host();
};

struct feed_result {
  double seconds = 0, gbps = 0, records_per_s = 0;
  std::size_t batch_size = 0;
  loader_stats stats;
  verdict judged;
};

// A batch of about 8 MiB (16 to 8192 records), at most half the records so a run has two batches.
template <class Source>
std::size_t feed_batch_size(const Source& src) {
  const std::size_t avg = std::max<std::size_t>(1, src.max_record_size());
  const std::size_t b = std::clamp<std::size_t>((std::size_t{8} << 20) / avg, 16, 8192);
  return std::min<std::size_t>(b, std::max<std::uint64_t>(1, src.size() / 2));
}

// Runs the loader over src for at most s.seconds (and s.epochs), releasing every batch at once.
template <class Source>
feed_result run_feed(const Source& src, const feed_settings& s) {
  loader_config cfg;
  cfg.batch_size = feed_batch_size(src);
  cfg.epochs = s.epochs;
  cfg.part = partition{};
  cfg.target = s.where;
  cfg.workers = s.workers;
  cfg.prefetch = s.prefetch;
  loader<Source> feed(src, cfg);
  const auto t0 = std::chrono::steady_clock::now();
  const auto limit = t0 + std::chrono::duration<double>(s.seconds);
  while (std::chrono::steady_clock::now() < limit) {
    auto b = feed.next();
    if (!b) break;
  }
#ifdef GPUFEED_CLI_HAS_CUDA
  if (!cfg.target.is_host()) GPUFEED_CUDA_TRY(cudaDeviceSynchronize());  // copies done
#endif
  feed_result r;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.stats = feed.stats();
  r.batch_size = cfg.batch_size;
  r.gbps = static_cast<double>(r.stats.bytes) / r.seconds / 1e9;
  r.records_per_s = static_cast<double>(r.stats.records) / r.seconds;
  r.judged = diagnose(r.stats, std::thread::hardware_concurrency());
  return r;
}

}  // namespace gpufeed::cli
