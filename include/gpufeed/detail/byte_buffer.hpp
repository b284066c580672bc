// gpufeed::detail — byte_buffer: a grow-only byte buffer that is never zero-filled. Its users
// overwrite all of it (a decoded chunk, a batch of file bytes), so zeroing first would only
// double the memory traffic. Keeps its allocation when resized smaller or reused.
#pragma once

#include <cstddef>
#include <memory>
#include <span>

namespace gpufeed::detail {

class byte_buffer {
 public:
  // Makes the size n, reallocating (contents lost) only when n exceeds the capacity; returns
  // the n bytes.
  std::span<std::byte> resize(std::size_t n) {
    if (n > capacity_) {
      data_.reset(new std::byte[n]);
      capacity_ = n;
    }
    size_ = n;
    return {data_.get(), n};
  }
  [[nodiscard]] std::byte* data() noexcept { return data_.get(); }
  [[nodiscard]] const std::byte* data() const noexcept { return data_.get(); }
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  [[nodiscard]] bool empty() const noexcept { return size_ == 0; }
  [[nodiscard]] std::size_t capacity() const noexcept { return capacity_; }
  // Frees the allocation.
  void release() noexcept {
    data_.reset();
    size_ = capacity_ = 0;
  }

 private:
  std::unique_ptr<std::byte[]> data_;
  std::size_t size_ = 0, capacity_ = 0;
};

}  // namespace gpufeed::detail
