// gpufeed::cuda::detail — reusable device and pinned buffers that grow to the largest request
// within a byte budget, for work whose size changes from batch to batch (the JPEG decoder's
// decoded pixels, its CPU-fallback staging and its per-image job tables).
#pragma once

#include <cstddef>
#include <string>

#include "gpufeed/cuda/device_buffer.hpp"
#include "gpufeed/cuda/pinned.hpp"
#include "gpufeed/error.hpp"

namespace gpufeed::cuda::detail {

// Owner of one buffer (device_buffer or pinned_buffer) that is replaced by a larger one when a
// request does not fit; never shrinks. Growing drops the old contents: callers grow before they
// queue work on the buffer, and only once earlier work on it has completed.
template <class Buffer>
class growing_buffer {
 public:
  explicit growing_buffer(std::size_t budget = static_cast<std::size_t>(-1), const char* what = "")
      : budget_(budget), what_(what) {}

  // At least `bytes` bytes; config_error when that is over the budget.
  std::byte* reserve(std::size_t bytes) {
    if (bytes > budget_)
      throw config_error(std::string(what_) + ": " + std::to_string(bytes) +
                         " bytes needed at once, over its budget of " + std::to_string(budget_));
    if (bytes > buf_.size()) {
      buf_ = Buffer();  // free first: the budget bounds what is held, not old + new
      buf_ = Buffer(grown(bytes));
    }
    return buf_.data();
  }
  [[nodiscard]] std::size_t capacity() const noexcept { return buf_.size(); }
  [[nodiscard]] std::size_t budget() const noexcept { return budget_; }

 private:
  // Grows by half again at least (fewer reallocations as sizes creep up), within the budget.
  [[nodiscard]] std::size_t grown(std::size_t bytes) const noexcept {
    const std::size_t more = buf_.size() + buf_.size() / 2;
    const std::size_t want = bytes > more ? bytes : more;
    return want < budget_ ? want : budget_;
  }

  Buffer buf_;
  std::size_t budget_;
  const char* what_;
};

}  // namespace gpufeed::cuda::detail
