// gpufeed::detail::image — how a batch's JPEGs are shared between the GPU decoder and the host
// threads, adapted from what each decoder took on the batches before.
//
// The host threads must decode the images the GPU cannot take (progressive ones on the hardware
// engines, CMYK, PNGs: `forced`). When they would finish those well before the GPU finishes its
// images, they also take some of the GPU's (`moved`), so that both finish a batch together:
//
//   host time  (forced * c_forced + moved * c_moved) / threads
//   GPU time   (gpu - moved) * c_gpu
//
// with c_* the running means of seconds per image each decoder took (record_*). Until a moved
// image has been timed, a batch whose host side would idle moves one image per thread to learn
// c_moved. Deterministic given the same recorded times; not thread-safe (one per decoder).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>

namespace gpufeed::detail::image {

class decode_split {
 public:
  // threads: the host decoders (the submitting thread among them); adaptive = false keeps every
  // GPU image on the GPU.
  explicit decode_split(std::size_t threads, bool adaptive = true) noexcept
      : threads_(static_cast<double>(std::max<std::size_t>(threads, 1))), adaptive_(adaptive) {}

  // How many of `gpu` GPU-decodable images the host threads should take beside `forced`.
  [[nodiscard]] std::size_t moved(std::size_t forced, std::size_t gpu) const noexcept {
    if (!adaptive_ || gpu == 0 || gpu_ <= 0) return 0;  // the GPU's cost is not known yet
    const double f = forced_ > 0 ? forced_ : moved_;
    const double host = f > 0 ? static_cast<double>(forced) * f / threads_ : 0;
    const double device = static_cast<double>(gpu) * gpu_;
    if (host >= device) return 0;
    if (moved_ <= 0) return std::min(gpu, static_cast<std::size_t>(threads_));  // learn c_moved
    const double k = (device - host) / (gpu_ + moved_ / threads_);
    return std::min(gpu, static_cast<std::size_t>(std::floor(k)));
  }

  // Seconds the host took for one image of each kind, the GPU for `images` images together.
  void record_forced(double seconds) noexcept { mix(forced_, seconds); }
  void record_moved(double seconds) noexcept { mix(moved_, seconds); }
  void record_gpu(std::size_t images, double seconds) noexcept {
    if (images > 0) mix(gpu_, seconds / static_cast<double>(images));
  }

  [[nodiscard]] double seconds_forced() const noexcept { return forced_; }
  [[nodiscard]] double seconds_moved() const noexcept { return moved_; }
  [[nodiscard]] double seconds_gpu() const noexcept { return gpu_; }

 private:
  // A running mean that follows change within a few batches: the first sample sets it.
  static void mix(double& mean, double sample) noexcept {
    if (!(sample >= 0) || !std::isfinite(sample)) return;
    mean = mean <= 0 ? sample : 0.8 * mean + 0.2 * sample;
  }

  double threads_;
  bool adaptive_;
  double forced_ = 0, moved_ = 0, gpu_ = 0;  // seconds per image; 0 = not measured yet
};

}  // namespace gpufeed::detail::image
