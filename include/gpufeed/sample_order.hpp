// gpufeed — the order vocabulary: sample_order (how an epoch orders the records) and
// record_units (the contiguous record ranges block_shuffled permutes).
//
// A leaf header (no gpufeed includes), so that loader_config, sampler and the order's detail/
// code (detail/order/) all name these types from one place. How the orders work is described in
// sampler.hpp; how a source's units are found, in detail/order/units.hpp.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace gpufeed {

// The epoch order (see sampler.hpp).
enum class sample_order { shuffled, sequential, block_shuffled };

inline const char* to_string(sample_order o) noexcept {
  switch (o) {
    case sample_order::shuffled: return "shuffled";
    case sample_order::sequential: return "sequential";
    case sample_order::block_shuffled: return "block_shuffled";
  }
  return "?";
}

// Contiguous record ranges [begin(u), end(u)) covering [0, records()) in order.
// Memory: 8 bytes per unit (none when every unit has the same size).
class record_units {
 public:
  record_units() = default;

  // Units of `per_unit` records (the last one may be short).
  static record_units uniform(std::uint64_t records, std::uint64_t per_unit) {
    record_units u;
    u.records_ = records;
    u.stride_ = std::max<std::uint64_t>(1, per_unit);
    return u;
  }

  // Units starting at `starts` (strictly increasing, starts[0] == 0), ending at `records`.
  static record_units from_starts(std::vector<std::uint64_t> starts, std::uint64_t records) {
    record_units u;
    u.records_ = records;
    u.starts_ = std::move(starts);
    u.starts_.push_back(records);
    for (std::size_t k = 1; k < u.starts_.size(); ++k)
      u.max_ = std::max(u.max_, u.starts_[k] - u.starts_[k - 1]);
    return u;
  }

  [[nodiscard]] std::uint64_t records() const noexcept { return records_; }
  [[nodiscard]] std::uint64_t size() const noexcept {
    if (stride_) return (records_ + stride_ - 1) / stride_;
    return starts_.empty() ? 0 : starts_.size() - 1;
  }
  [[nodiscard]] std::uint64_t begin(std::uint64_t u) const noexcept {
    return stride_ ? u * stride_ : starts_[u];
  }
  [[nodiscard]] std::uint64_t end(std::uint64_t u) const noexcept {
    return stride_ ? std::min(records_, (u + 1) * stride_) : starts_[u + 1];
  }
  [[nodiscard]] std::uint64_t max_records() const noexcept {
    return stride_ ? std::min(stride_, records_) : max_;
  }

 private:
  std::uint64_t records_ = 0;
  std::uint64_t stride_ = 0;          // uniform units when non-zero
  std::vector<std::uint64_t> starts_;  // otherwise: unit starts, then records_
  std::uint64_t max_ = 0;
};

}  // namespace gpufeed
