// The gpufeed CLI's loader runs, shared by doctor and bench: open the shards at a path as the
// right source, and run the library's loader over them for a bounded time with the consumer
// doing no work, so the figures and the verdict describe loading alone.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "gpufeed/detail/pack_directory.hpp"
#include "gpufeed/detail/order/units.hpp"
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

// The shards at `data`: a pack directory or its manifest.json (the shards it lists), another
// directory of shards (sorted by name), one HDF5 file, or one LMDB environment. `lmdb` tells
// which format. Empty when a directory holds none. io_error when the path does not exist,
// format_error when it is not a shard or is a pack that did not finish.
inline std::vector<std::filesystem::path> find_shards(const std::string& data, bool& lmdb) {
  if (auto listed = detail::pack_directory_shards(data)) {
    lmdb = is_lmdb(listed->front().string());
    return std::move(*listed);
  }
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

// find_shards, and for a URL (http://, https://, s3://): the shards of a pack's manifest.json
// there (detail/hdf5/manifest_url.hpp), else the one HDF5 shard it names. Errors as find_shards
// and, for a URL, manifest_url_shards.
inline std::vector<std::filesystem::path> find_data_shards(const std::string& data, bool& lmdb) {
  if (!detail::remote::is_remote_url(data)) return find_shards(data, lmdb);
  lmdb = false;
  return detail::hdf5::expand_manifest_url({std::filesystem::path(data)}, "hdf5");
}

// DATA as reports show it: a URL redacted (no userinfo, no secret query values).
inline std::string shown_data(const std::string& data) {
  return detail::remote::is_remote_url(data) ? detail::remote::redact_url(data) : data;
}

// Which HDF5 datasets a run reads (--dataset, --labels); LMDB shards have neither.
struct dataset_choice {
  std::string dataset = "data";
  std::optional<std::string> labels;  // unset: hdf5_options' default ("labels" when present)
  std::optional<std::size_t> cache_bytes;  // unset: hdf5_options' automatic decode cache budget
};

// Calls f(source) with an hdf5_source or an lmdb_source over the shards; returns false (without
// calling f) when there are none.
template <class F>
bool with_source(const std::vector<std::filesystem::path>& shards, bool lmdb, F&& f,
                 const dataset_choice& d = {}) {
  if (shards.empty()) return false;
  if (lmdb) {
    f(lmdb_source(shards));
  } else {
    hdf5_options o;
    o.dataset = d.dataset;
    o.label_dataset = d.labels;
    o.decode_cache_bytes = d.cache_bytes;
    f(hdf5_source(shards, o));
  }
  return true;
}

// The order a run uses, and why. "auto" picks what the loader's own notice recommends:
// block_shuffled where a decode unit (compressed chunk) holds several records, since shuffled
// order would decode a whole unit per record; shuffled otherwise (records decode alone).
struct order_choice {
  sample_order order = sample_order::shuffled;
  std::string reason;         // "auto: ..." or "as asked (--order)"
  double records_per_unit = 1;
  std::string notice;         // the loader's shuffled-order notice when it applies, else empty
};

template <class Source>
order_choice choose_order(const Source& src, const std::string& asked) {
  order_choice c;
  c.records_per_unit = detail::records_per_decode_unit(src);
  const bool many = c.records_per_unit >= detail::loading::shuffled_notice_records;
  const std::string per = std::to_string(static_cast<std::uint64_t>(c.records_per_unit));
  if (asked == "auto" || asked.empty()) {
    c.order = many ? sample_order::block_shuffled : sample_order::shuffled;
    c.reason = many ? "auto: a decode unit holds " + per +
                          " records, which shuffled order would decode once per record"
                    : "auto: records decode one at a time";
  } else {
    c.order = asked == "sequential"       ? sample_order::sequential
              : asked == "block_shuffled" ? sample_order::block_shuffled
                                          : sample_order::shuffled;
    c.reason = "as asked (--order)";
  }
  if (c.order == sample_order::shuffled && many)
    c.notice = "shuffled order on decode units of " + per +
               " records: every record read at random decodes its whole unit (~" + per +
               "x the bytes delivered); --order block_shuffled (or --order auto) decodes each "
               "unit once per epoch";
  return c;
}

struct feed_settings {
  double seconds = 3.0;
  std::size_t workers = 0, prefetch = 0;  // 0: the loader's defaults
  std::uint64_t epochs = 1;               // 0: as many as fit in `seconds`
  target where = target::host();
  sample_order order = sample_order::shuffled;
  // The loader prints its shuffled-order notice on stderr at construction; a caller that runs
  // many loaders says it once itself and silences theirs.
  bool silence_notice = false;
};

// Sends stderr to /dev/null for its lifetime (the loader's one-time notice, see above).
class stderr_silenced {
 public:
  explicit stderr_silenced(bool on) {
    if (!on) return;
    std::fflush(stderr);
    saved_ = ::dup(2);
    const int null = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (saved_ < 0 || null < 0 || ::dup2(null, 2) < 0) {
      if (null >= 0) ::close(null);
      restore();
      return;
    }
    ::close(null);
  }
  ~stderr_silenced() { restore(); }
  stderr_silenced(const stderr_silenced&) = delete;
  stderr_silenced& operator=(const stderr_silenced&) = delete;

 private:
  void restore() noexcept {
    if (saved_ < 0) return;
    std::fflush(stderr);
    ::dup2(saved_, 2);
    ::close(saved_);
    saved_ = -1;
  }
  int saved_ = -1;
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
  cfg.order = s.order;
  std::optional<loader<Source>> made;
  {
    const stderr_silenced quiet(s.silence_notice);
    made.emplace(src, cfg);
  }
  loader<Source>& feed = *made;
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
