// gpufeed bench's storage measurement: the read rate of the shards' files from storage (cold:
// the page cache evicted first with posix_fadvise(POSIX_FADV_DONTNEED)) and from the page cache
// (warm), one thread, large sequential reads, bounded by a time budget. Built on the doctor's
// storage helpers (list, residency, timed sequential read).
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "gpufeed/doctor/detail/format.hpp"
#include "gpufeed/doctor/detail/storage_io.hpp"

namespace gpufeed::cli {

struct storage_rates {
  std::uint64_t files = 0, total_bytes = 0;
  std::uint64_t cold_bytes = 0, warm_bytes = 0;
  double cold_gbps = 0, warm_gbps = 0;
  bool evicted = false;       // the cold pass found (almost) nothing of its bytes cached
  double cached_before = 0;   // fraction of the cold pass's bytes still cached after eviction
  std::string note;           // why the cold figure is not a storage rate, when it is not
};

namespace detail_bench {

using gpufeed::detail::doctor::data_file;

// Asks the kernel to drop the files' clean cached pages; returns the first failure ("" if none).
inline std::string evict(const std::vector<data_file>& files) {
  for (const auto& f : files) {
    const int fd = ::open(f.path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return "open " + f.path.string() + ": " + std::strerror(errno);
    const int rc = ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
    if (rc != 0) return "posix_fadvise " + f.path.string() + ": " + std::strerror(rc);
  }
  return {};
}

}  // namespace detail_bench

// Measures within about `seconds`: a short probe read sets how many bytes the cold pass can read
// in half the budget; the cold pass reads them after evicting the files, the warm pass re-reads
// them (at most half the available memory). io_error naming the file when a read fails.
inline storage_rates measure_storage(const std::string& data, double seconds) {
  namespace doc = gpufeed::detail::doctor;
  constexpr std::size_t block = std::size_t{16} << 20;
  storage_rates r;
  const doc::file_listing list = doc::list_data_files(data, 1'000'000);
  r.files = list.files.size();
  r.total_bytes = list.total_bytes;
  if (list.files.empty()) {
    r.note = "no data files";
    return r;
  }
  std::string refused = detail_bench::evict(list.files);
  const doc::read_pass probe = doc::read_sequential(list.files, std::uint64_t{32} << 20, block, false);
  std::uint64_t cap = static_cast<std::uint64_t>(probe.gbps() * 1e9 * seconds / 2);
  cap = std::clamp<std::uint64_t>(cap, std::min<std::uint64_t>(probe.bytes, list.total_bytes),
                                  list.total_bytes);
  if (refused.empty()) refused = detail_bench::evict(list.files);
  std::uint64_t scanned = 0;
  const std::uint64_t resident = doc::resident_bytes(list.files, cap, scanned);
  r.cached_before = scanned ? static_cast<double>(resident) / static_cast<double>(scanned) : 0.0;
  r.evicted = refused.empty() && r.cached_before < 0.05;
  if (!refused.empty())
    r.note = "could not evict the page cache (" + refused + "): the cold figure may be a cache rate";
  else if (!r.evicted)
    r.note = "could not evict the page cache: " + doc::fixed(100 * r.cached_before, 0) +
             " % of the bytes stayed cached (tmpfs, dirty pages or another process holding "
             "them), so the cold figure is " + (r.cached_before > 0.95 ? "a" : "partly a") +
             " page-cache rate";
  const doc::read_pass cold = doc::read_sequential(list.files, cap, block, false);
  r.cold_bytes = cold.bytes;
  r.cold_gbps = cold.gbps();
  const doc::meminfo mem = doc::read_meminfo("/proc/meminfo");
  std::uint64_t warm_cap = cold.bytes;
  if (mem.available) warm_cap = std::min<std::uint64_t>(warm_cap, mem.available / 2);
  const doc::read_pass warm = doc::read_sequential(list.files, warm_cap, block, false);
  r.warm_bytes = warm.bytes;
  r.warm_gbps = warm.gbps();
  return r;
}

}  // namespace gpufeed::cli
