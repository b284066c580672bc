// gpufeed — a reader's hold on one decoded chunk of the decoded-unit cache
// (shared_chunk_cache.hpp) while it copies from it. A pinned chunk is never evicted.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <utility>

#include "gpufeed/detail/unit_cache/stripes.hpp"

namespace gpufeed::detail::unit_cache {

class shared_chunk_cache;

// A chunk's decoded bytes, held for one record's copy. Unpins on destruction. Move-only.
class pin {
 public:
  pin() = default;
  pin(const pin&) = delete;
  pin& operator=(const pin&) = delete;
  pin(pin&& o) noexcept
      : table_(o.table_), at_(o.at_), key_(o.key_), data_(o.data_),
        overflow_(std::move(o.overflow_)) {
    o.table_ = nullptr;
  }
  ~pin() {
    if (table_) table_->unpin(*at_, key_);
  }
  [[nodiscard]] const std::byte* data() const noexcept { return data_; }

 private:
  friend class shared_chunk_cache;
  pin(stripe_table* t, stripe* at, std::uint64_t key, const std::byte* d) noexcept
      : table_(t), at_(at), key_(key), data_(d) {}
  // The cache's overflow buffer, read under its lock (held until the pin goes).
  pin(std::unique_lock<std::mutex> overflow, const std::byte* d) noexcept
      : data_(d), overflow_(std::move(overflow)) {}
  stripe_table* table_ = nullptr;  // null: the overflow buffer, nothing to unpin
  stripe* at_ = nullptr;
  std::uint64_t key_ = 0;
  const std::byte* data_ = nullptr;
  std::unique_lock<std::mutex> overflow_;  // held while the overflow buffer is read
};

}  // namespace gpufeed::detail::unit_cache
