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

#ifdef GPUFEED_TESTING
// Test-only observation point (test targets define GPUFEED_TESTING): when set, called with each
// extent advised (data file, offset in it, bytes).
using advise_hook = void (*)(const std::string& data_file, std::uint64_t offset,
                             std::uint64_t bytes) noexcept;
inline std::atomic<advise_hook> advise_observer{nullptr};
#endif

inline void advise_pages(const shard& s, std::uint64_t at, std::uint64_t end) noexcept {
  if (end <= at) return;
#ifdef GPUFEED_TESTING
  if (const auto hook = advise_observer.load(std::memory_order_relaxed))
    hook(s.data_file, at, end - at);
#endif
  (void)::madvise(const_cast<std::byte*>(s.valid.base) + at, end - at, MADV_WILLNEED);
}

struct unpin_at_exit {
  const catalog& c;
  std::size_t k;
  ~unpin_at_exit() { c.unpin(k); }
};

// Advises the pages of records [first, first + count) (clipped to the catalog). Shards not
// opened yet, or whose environment is closed (bounded), are not advised (opening is I/O; their
// first read opens them). An advised shard is pinned meanwhile, so its map stays.
inline void advise_records(const catalog& c, std::uint64_t first, std::uint64_t count) noexcept {
  const long os_page = ::sysconf(_SC_PAGESIZE);
  const std::uint64_t page = os_page > 0 ? static_cast<std::uint64_t>(os_page) : 4096;
  c.for_each_shard_part(first, count, [&](std::size_t k, std::uint64_t lo_rec,
                                          std::uint64_t hi_rec) noexcept {
    const shard_table* t = c.if_open(k);
    if (!t || !c.pin_if_open(k)) return;  // a closed environment is not reopened for advice
    const unpin_at_exit pin{c, k};
    if (!t->s.valid.known()) return;
    const shard& s = t->s;
    std::uint64_t at = 0, stop = 0;
    bool any = false;
    for (std::uint64_t r = lo_rec; r < hi_rec; ++r) {
      const std::uint64_t v = t->value_offset(r);
      if (v == shard_table::no_offset) continue;
      const std::uint64_t lo = v / page * page;
      const std::uint64_t hi =
          std::min<std::uint64_t>((v + t->entry(r).value_size + page - 1) / page * page,
                                  (s.valid.size + page - 1) / page * page);
      if (any && lo <= stop) {
        stop = std::max(stop, hi);
        continue;
      }
      if (any) advise_pages(s, at, stop);
      any = true;
      at = lo;
      stop = hi;
    }
    if (any) advise_pages(s, at, stop);
  });
}

}  // namespace gpufeed::detail::lmdb
