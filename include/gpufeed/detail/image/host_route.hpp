// gpufeed::detail::image — the CPU route of a GPU JPEG batch (cuda::jpeg_batch_decoder): the
// images the GPU decoder cannot take, and the share of its images the split gives the host, are
// decoded by TurboJPEG at full size on a pool of host threads into pinned staging, each at its
// offset, while the submitting thread runs the GPU decode's submission (`lead`). Each image's
// decode time feeds the split (decode_split.hpp). The same threads read and route the batch's
// headers first (plan). Host-only: the upload and the crop are the caller's.
#pragma once

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <exception>
#include <span>
#include <utility>
#include <vector>

#include "gpufeed/detail/image/decode_split.hpp"
#include "gpufeed/detail/image/host_decode_pool.hpp"
#include "gpufeed/detail/image/nvjpeg_batch_plan.hpp"
#include "gpufeed/error.hpp"

namespace gpufeed::detail::image {

class host_route {
 public:
  // threads: the host decoders, the caller's among them; share: whether the split may give the
  // host some of the GPU's images.
  host_route(std::size_t threads, bool share, gpufeed::image::decoder_options o)
      : pool_(threads, o), split_(pool_.threads(), share), headers_(o) {}

  [[nodiscard]] decode_split& split() noexcept { return split_; }

  // Routes of a batch: nvjpeg::plan_one on the pool's threads, each with a parse target of its
  // own; an image the nvJPEG header read leaves unsized on the CPU route (not a JPEG: a PNG) is
  // sized by the CPU decoder's header read. Throws library_error when nvJPEG itself fails.
  std::vector<nvjpeg::planned_image> plan(const nvjpeg::library& lib, nvjpeg::handle_t h,
                                          std::span<const nvjpeg::batch_item> items,
                                          const nvjpeg::plan_limits& limits) {
    while (limits.hardware && streams_.size() < pool_.threads())
      streams_.push_back(nvjpeg::create_jpeg_stream(lib, h));
    std::vector<nvjpeg::planned_image> out(items.size());
    pool_.run_indexed(
        items.size(),
        [&](std::size_t k, std::size_t t) {
          out[k] = nvjpeg::plan_one(lib, h, items[k], limits,
                                    limits.hardware ? streams_[t].get() : nullptr);
        },
        [] {});
    for (std::size_t i = 0; i < items.size(); ++i)
      if (out[i].to == nvjpeg::route::cpu && out[i].width == 0) out[i] = cpu_plan(items[i]);
    return out;
  }

  // Every image on the CPU route, sized by the CPU decoder's header read (no nvJPEG).
  std::vector<nvjpeg::planned_image> plan_on_cpu(std::span<const nvjpeg::batch_item> items) {
    std::vector<nvjpeg::planned_image> out;
    out.reserve(items.size());
    for (const auto& it : items) out.push_back(cpu_plan(it));
    return out;
  }
  [[nodiscard]] std::size_t threads() const noexcept { return pool_.threads(); }

  // Decodes items[list[k]] for every k (the first `forced` of them the images only the CPU
  // takes) into host + at[i], an image of more bytes than its plan's decoded size rounded up to
  // `align` being corrupt; size[i] gets its width and height, errors[i] its typed fault (a
  // corrupt_error, format_error or unsupported_error naming its record). lead() runs on this
  // thread meanwhile. Exceptions other than gpufeed::error (from lead or a decode) propagate.
  template <class L>
  void decode(std::span<const nvjpeg::batch_item> items, std::span<const nvjpeg::planned_image> plan,
              std::span<const std::size_t> list, std::size_t forced, std::span<const std::size_t> at,
              std::size_t align, std::byte* host, std::span<std::array<int, 2>> size,
              std::span<std::exception_ptr> errors, L&& lead) {
    std::vector<double> secs(list.size(), -1.0);
    pool_.run(
        list.size(),
        [&](std::size_t k, gpufeed::image::image_decoder& d, gpufeed::image::rgb_image& img) {
          const std::size_t i = list[k];
          const auto t0 = std::chrono::steady_clock::now();
          try {
            d.decode(items[i].bytes, img, items[i].where);
          } catch (const error&) {
            errors[i] = std::current_exception();
            return;
          }
          secs[k] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          const std::size_t room = (nvjpeg::decoded_bytes(plan[i]) + align - 1) / align * align;
          if (img.size_bytes() > room) {  // TurboJPEG disagrees with the header read
            errors[i] = std::make_exception_ptr(corrupt_error(
                "corrupt JPEG: its decode is larger than its header says", items[i].where));
            return;
          }
          std::memcpy(host + at[i], img.data(), img.size_bytes());
          size[i] = {img.width(), img.height()};
        },
        std::forward<L>(lead));
    const std::size_t f = std::min(forced, list.size());
    split_.record_forced(mean(secs, 0, f));
    split_.record_moved(mean(secs, f, list.size()));
  }

 private:
  nvjpeg::planned_image cpu_plan(const nvjpeg::batch_item& item) {
    nvjpeg::planned_image p;
    try {
      const gpufeed::image::image_header hd = headers_.header(item.bytes, item.where);
      p.to = nvjpeg::route::cpu;
      p.width = hd.width;
      p.height = hd.height;
      p.components = hd.components;
    } catch (const error&) {
      p.to = nvjpeg::route::failed;
      p.error = std::current_exception();
    }
    return p;
  }

  // The mean of the timed decodes in [from, to); -1 (ignored by the split) when none was timed.
  static double mean(const std::vector<double>& secs, std::size_t from, std::size_t to) {
    double sum = 0;
    std::size_t n = 0;
    for (std::size_t k = from; k < to; ++k)
      if (secs[k] >= 0) sum += secs[k], ++n;
    return n == 0 ? -1.0 : sum / static_cast<double>(n);
  }

  host_decode_pool pool_;
  decode_split split_;
  gpufeed::image::image_decoder headers_;        // header reads on the calling thread
  std::vector<nvjpeg::jpeg_stream> streams_;     // the pool threads' parse targets
};

}  // namespace gpufeed::detail::image
