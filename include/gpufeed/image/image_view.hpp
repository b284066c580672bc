// gpufeed::image — where decoded pixels live: image_view (a borrowed HWC uint8 raster) and
// rgb_image (an owned, reusable one).
//
// Every image function in gpufeed works on 8-bit interleaved rows, height x width x channels,
// rows `stride` bytes apart (stride >= width * channels), top row first — the layout TurboJPEG
// and libspng write, and what cuda::normalizer reads as uint8 HWC.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

namespace gpufeed::image {

struct image_view {
  std::uint8_t* data = nullptr;
  int width = 0, height = 0;
  int channels = 3;
  std::size_t stride = 0;  // bytes from one row to the next

  [[nodiscard]] std::uint8_t* row(int y) const noexcept {
    return data + static_cast<std::size_t>(y) * stride;
  }
  [[nodiscard]] std::size_t size_bytes() const noexcept {
    return static_cast<std::size_t>(height) * stride;
  }
};

// A packed (stride = width * channels) raster that keeps its allocation when reshaped to the
// same or a smaller size, so one per worker decodes every record without allocating.
class rgb_image {
 public:
  rgb_image() = default;
  rgb_image(int width, int height, int channels = 3) { reshape(width, height, channels); }

  // Makes the raster width x height x channels; contents are unspecified afterwards.
  void reshape(int width, int height, int channels = 3) {
    const std::size_t n = static_cast<std::size_t>(width) * static_cast<std::size_t>(height) *
                          static_cast<std::size_t>(channels);
    if (n > capacity_) {
      data_.reset(new std::uint8_t[n]);
      capacity_ = n;
    }
    width_ = width;
    height_ = height;
    channels_ = channels;
  }
  [[nodiscard]] image_view view() noexcept {
    return {data_.get(), width_, height_, channels_,
            static_cast<std::size_t>(width_) * static_cast<std::size_t>(channels_)};
  }
  [[nodiscard]] int width() const noexcept { return width_; }
  [[nodiscard]] int height() const noexcept { return height_; }
  [[nodiscard]] int channels() const noexcept { return channels_; }
  [[nodiscard]] std::uint8_t* data() noexcept { return data_.get(); }
  [[nodiscard]] const std::uint8_t* data() const noexcept { return data_.get(); }
  [[nodiscard]] std::size_t size_bytes() const noexcept {
    return static_cast<std::size_t>(width_) * static_cast<std::size_t>(height_) *
           static_cast<std::size_t>(channels_);
  }

 private:
  std::unique_ptr<std::uint8_t[]> data_;
  std::size_t capacity_ = 0;
  int width_ = 0, height_ = 0, channels_ = 3;
};

}  // namespace gpufeed::image
