// gpufeed — read-ahead advice for LMDB shards: madvise(MADV_WILLNEED) over the mapped pages that
// hold a range of records' values, so the kernel starts reading them before the workers touch
// them (shards are opened with MDB_NORDAHEAD: LMDB's own read-ahead is off). Values of
// neighbouring keys sit in the same leaf page or in consecutive overflow pages; page ranges that
// touch or overlap are merged into one call. Advice only: failures are ignored and nothing is
// read here (no page of the map is touched).
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <string>

#include "gpufeed/detail/lmdb/catalog.hpp"

namespace gpufeed::detail::lmdb {

// Test-only observation point: when set, called with each extent advised (data file, offset in
// it, bytes).
using advise_hook = void (*)(const std::string& data_file, std::uint64_t offset,
                             std::uint64_t bytes) noexcept;
inline std::atomic<advise_hook> advise_observer{nullptr};

inline void advise_pages(const shard& s, std::uint64_t at, std::uint64_t end) noexcept {
  if (end <= at) return;
  if (const auto hook = advise_observer.load(std::memory_order_relaxed))
    hook(s.data_file, at, end - at);
  (void)::madvise(const_cast<std::byte*>(s.valid.base) + at, end - at, MADV_WILLNEED);
}

// Advises the pages of records [first, first + count) (clipped to the catalog).
inline void advise_records(const catalog& c, std::uint64_t first, std::uint64_t count) noexcept {
  if (first >= c.size()) return;
  const std::uint64_t end = c.size() - first < count ? c.size() : first + count;
  const long os_page = ::sysconf(_SC_PAGESIZE);
  const std::uint64_t page = os_page > 0 ? static_cast<std::uint64_t>(os_page) : 4096;
  const shard* cur = nullptr;
  std::uint64_t at = 0, stop = 0;
  for (std::uint64_t i = first; i < end; ++i) {
    const shard& s = c.shards()[c.shard_of(i)];
    const std::uint64_t v = c.value_offset(i);
    if (!s.valid.known() || v == catalog::no_offset) continue;
    const std::uint64_t lo = v / page * page;
    const std::uint64_t hi =
        std::min<std::uint64_t>((v + c.entry(i).value_size + page - 1) / page * page,
                                (s.valid.size + page - 1) / page * page);
    if (cur == &s && lo <= stop) {
      stop = std::max(stop, hi);
      continue;
    }
    if (cur) advise_pages(*cur, at, stop);
    cur = &s;
    at = lo;
    stop = hi;
  }
  if (cur) advise_pages(*cur, at, stop);
}

}  // namespace gpufeed::detail::lmdb
