// gpufeed — the decode units of one band that a reader keeps pinned across consecutive records
// of it (a band: the units one record spans, e.g. every chunk of an HDF5 row of chunks).
//
// Pinning a record's units per record takes the cache's locks for every record; in sequential
// order a worker's task reads many records of one band, so the reader keeps the band's units
// pinned from one record to the next and counts the reads it served, adding them to the units'
// read counts when it lets go (a pinned unit is never evicted, so counting late changes no
// eviction; docs/design.md, "HDF5 compressed chunks"). It lets go when a record needs another
// band, when the reader goes idle, and when it is destroyed. Holding one band per reader is
// within the cache budget, which counts one unit per worker (automatic_budget.hpp). Records that
// lie in one unit are held the same way, a band of one unit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "gpufeed/detail/unit_cache/shared_chunk_cache.hpp"

namespace gpufeed::detail::unit_cache {

class band_hold {
 public:
  explicit band_hold(unit_cache::shared_chunk_cache& cache) noexcept : cache_(&cache) {}
  band_hold(const band_hold&) = delete;
  band_hold& operator=(const band_hold&) = delete;
  band_hold(band_hold&& o) noexcept
      : cache_(o.cache_), groups_(std::move(o.groups_)), keys_(std::move(o.keys_)),
        bytes_(std::move(o.bytes_)), band_(o.band_), reads_(o.reads_), held_(o.held_) {
    o.forget();
  }
  band_hold& operator=(band_hold&& o) noexcept {
    if (this != &o) {
      drop();
      cache_ = o.cache_;
      groups_ = std::move(o.groups_);
      keys_ = std::move(o.keys_);
      bytes_ = std::move(o.bytes_);
      band_ = o.band_;
      reads_ = o.reads_;
      held_ = o.held_;
      o.forget();
    }
    return *this;
  }
  ~band_hold() { drop(); }

  // True when the chunks of band `band` (its first chunk's cache key) are held, all ready.
  [[nodiscard]] bool holds(std::uint64_t band) const noexcept { return held_ && band_ == band; }

  // Pins the ready chunks among keys() (bytes()[i] = their bytes, null when not ready). Call
  // drop() before filling keys() with add(). The pins last until drop().
  void pin(std::uint64_t band) {
    bytes_.resize(keys_.size());
    cache_->pin_ready(groups_, keys_, bytes_);
    band_ = band;
  }
  // A record read the held chunks again.
  void count_read() noexcept { ++reads_; }
  // Keeps the pins past this record when every chunk was ready; otherwise lets go.
  void keep_if_complete() noexcept {
    for (const std::byte* b : bytes_)
      if (!b) return drop();
    held_ = true;
  }
  void drop() noexcept {
    if (!keys_.empty()) cache_->unpin_ready(groups_, keys_, bytes_, reads_);
    groups_.clear();
    keys_.clear();
    bytes_.clear();
    reads_ = 0;
    held_ = false;
  }

  // A chunk to pin (cache key and group, shared_chunk_cache::get), added before pin().
  void add(std::uint64_t group, std::uint64_t key) {
    groups_.push_back(group);
    keys_.push_back(key);
  }
  // The pinned chunks' bytes, in the order add() named them.
  [[nodiscard]] const std::vector<const std::byte*>& bytes() const noexcept { return bytes_; }

 private:
  void forget() noexcept {
    groups_.clear();
    keys_.clear();
    bytes_.clear();
    reads_ = 0;
    held_ = false;
  }

  unit_cache::shared_chunk_cache* cache_;
  std::vector<std::uint64_t> groups_, keys_;
  std::vector<const std::byte*> bytes_;
  std::uint64_t band_ = 0;
  std::uint64_t reads_ = 0;  // records served since pin(), beyond the first
  bool held_ = false;
};

}  // namespace gpufeed::detail::unit_cache
