// gpufeed::detail::record_space — the global record numbering of a set of shards: shard k holds
// records [first(k), first(k + 1)), shards in the order given, so a shard of no records takes
// no numbers. locate() finds a record's shard and its index there; for_each_shard_part() splits
// a range of records over the shards it spans. Format-free: it knows record counts only.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace gpufeed::detail::record_space {

// Where a global record lies: its shard and its index within that shard.
struct shard_place {
  std::size_t shard = 0;
  std::uint64_t local = 0;
};

class shard_offsets {
 public:
  // Appends the next shard, holding `records` records.
  void add_shard(std::uint64_t records) { first_.push_back(first_.back() + records); }

  [[nodiscard]] std::uint64_t size() const noexcept { return first_.back(); }
  [[nodiscard]] std::size_t shard_count() const noexcept { return first_.size() - 1; }
  // First global record of shard k; first(shard_count()) == size().
  [[nodiscard]] std::uint64_t first(std::size_t k) const noexcept { return first_[k]; }
  [[nodiscard]] std::uint64_t records(std::size_t k) const noexcept {
    return first_[k + 1] - first_[k];
  }

  // The shard holding global record i (i < size(), which callers check), and its index there.
  // A shard of no records is never the answer: i lies in the next shard that holds records.
  [[nodiscard]] shard_place locate(std::uint64_t i) const noexcept {
    std::size_t k = 0;
    if (first_.size() > 2) {
      const auto it = std::upper_bound(first_.begin(), first_.end() - 1, i);
      k = static_cast<std::size_t>(it - first_.begin()) - 1;
    }
    return shard_place{k, i - first_[k]};
  }

  // Calls fn(k, lo, hi) for each shard k from first's on that starts before the range's end,
  // with [lo, hi) the local records of [first, first + count) it holds (count clipped to the
  // space; nothing when first >= size()). Shards of no records inside the range are passed with
  // an empty part. Every record of the range is passed exactly once, in order.
  template <class Fn>
  void for_each_shard_part(std::uint64_t first, std::uint64_t count, Fn&& fn) const {
    if (first >= size()) return;
    const std::uint64_t end = size() - first < count ? size() : first + count;
    for (std::size_t k = locate(first).shard; k < shard_count(); ++k) {
      const std::uint64_t lo = first_[k], hi = first_[k + 1];
      if (lo >= end) break;
      fn(k, std::max(first, lo) - lo, std::min(end, hi) - lo);
    }
  }

 private:
  std::vector<std::uint64_t> first_{0};  // first global record of each shard; back() = total
};

}  // namespace gpufeed::detail::record_space
