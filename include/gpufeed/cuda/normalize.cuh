// gpufeed::cuda — per-channel normalisation of uint8 records into float, __half or __nv_bfloat16.
//
// For a batch of `records` records of `record_elems` uint8 elements each, contiguous ([B, E]):
//
//     out[j] = ((float)in[j] * scale - mean[c]) * (1 / std[c])     (then rounded to Out)
//
// with c the channel of element j: HWC (interleaved) c = j % C; CHW (planar)
// c = (j / plane) % C, plane = record_elems / C. Every step is a float operation rounded to
// nearest (no FMA contraction); 1/std[c] is computed once, in float, on the host; the float
// result is converted to __half / __nv_bfloat16 with round-to-nearest-even. A host reference that
// does the same float operations in the same order reproduces the output bit for bit.
//
// Speed: memory-bound. Per element it reads 1 byte and writes sizeof(Out), so it runs near the
// rate of a device-to-device copy of 1 + sizeof(Out) bytes per element; bench/transforms_bench
// measures it. The vector path needs `in` 4-byte and
// `out` 4*sizeof(Out)-byte aligned (cudaMalloc and the loader's slots are); other pointers take a
// correct but slower element-by-element path.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>

#include "gpufeed/cuda/detail/normalize_kernels.cuh"
#include "gpufeed/cuda/transform.hpp"
#include "gpufeed/error.hpp"

namespace gpufeed::cuda {

// How a record's channels are laid out.
enum class channel_layout {
  hwc,  // interleaved: pixel by pixel, C values each (element j has channel j % C)
  chw,  // planar: C planes of record_elems / C elements each
};

// Most channels a normalizer takes (mean and 1/std travel in the kernel's arguments).
inline constexpr std::size_t max_normalize_channels = detail::normalize_max_channels;

template <class Out>
concept normalize_output =
    std::same_as<Out, float> || std::same_as<Out, __half> || std::same_as<Out, __nv_bfloat16>;

// A validated set of normalisation parameters, applied by operator() on a caller's stream.
//
// Holds no device memory: mean and 1/std (C floats each) are passed to the kernel by value at
// every launch, where they sit in the constant bank and each block copies them to shared memory.
// So construction needs no GPU and never allocates device memory, calls need no scratch, any
// number of normalizers with different parameters can run concurrently on different streams, and
// a normalizer may be destroyed while its kernels are still queued. It is a cheap value (copyable:
// a transform_hook, being a std::function, needs a copyable callable).
template <normalize_output Out>
class normalizer {
 public:
  // Throws config_error when: mean is empty (C == 0) or longer than max_normalize_channels;
  // stddev is not the same length as mean; a std is 0, negative, not finite or so small that
  // 1/std overflows; a mean or scale is not finite; record_elems is 0 or not a multiple of C.
  normalizer(channel_layout layout, std::size_t record_elems, std::span<const float> mean,
             std::span<const float> stddev, float scale = 1.0f)
      : layout_(layout), record_elems_(record_elems) {
    const std::size_t c = mean.size();
    if (c == 0) throw config_error("normalizer: no channels (mean is empty)");
    if (c > max_normalize_channels)
      throw config_error("normalizer: " + std::to_string(c) + " channels; at most " +
                         std::to_string(max_normalize_channels) + " are supported");
    if (stddev.size() != c)
      throw config_error("normalizer: " + std::to_string(c) + " means but " +
                         std::to_string(stddev.size()) + " standard deviations");
    if (!std::isfinite(scale))
      throw config_error("normalizer: scale is not finite");
    if (record_elems == 0) throw config_error("normalizer: record_elems is 0");
    if (record_elems % c != 0)
      throw config_error("normalizer: record_elems " + std::to_string(record_elems) +
                         " is not a multiple of the " + std::to_string(c) + " channels");
    if (layout != channel_layout::hwc && layout != channel_layout::chw)
      throw config_error("normalizer: unknown channel_layout");
    params_.scale = scale;
    params_.channels = static_cast<std::uint32_t>(c);
    for (std::size_t i = 0; i < c; ++i) {
      const std::string at = "[" + std::to_string(i) + "]";
      if (!std::isfinite(mean[i])) throw config_error("normalizer: mean" + at + " is not finite");
      if (!std::isfinite(stddev[i]))
        throw config_error("normalizer: std" + at + " is not finite");
      if (stddev[i] == 0.0f) throw config_error("normalizer: std" + at + " is 0");
      if (stddev[i] < 0.0f) throw config_error("normalizer: std" + at + " is negative");
      const float inv = 1.0f / stddev[i];
      if (!std::isfinite(inv))
        throw config_error("normalizer: std" + at + " is too small (1/std overflows)");
      params_.mean[i] = mean[i];
      params_.inv_std[i] = inv;
    }
  }

  // Queues out[j] = normalize(in[j]) for the records * record_elems elements of a batch
  // ([records, record_elems] uint8 in, the same shape of Out out, both device memory, not
  // overlapping) on `stream` and returns: no host synchronisation, no allocation. records == 0
  // queues nothing. Throws config_error for a null pointer with records > 0 or a size that
  // overflows, cuda_error if the launch fails.
  void operator()(const std::uint8_t* in, Out* out, std::size_t records,
                  cudaStream_t stream) const {
    if (records == 0) return;
    if (in == nullptr || out == nullptr)
      throw config_error("normalizer: null input or output pointer for " +
                         std::to_string(records) + " records");
    if (records > std::numeric_limits<std::size_t>::max() / sizeof(Out) / record_elems_)
      throw config_error("normalizer: " + std::to_string(records) + " records of " +
                         std::to_string(record_elems_) + " elements overflow the address space");
    const std::uint64_t n = static_cast<std::uint64_t>(records) * record_elems_;
    detail::launch_normalize<Out>(in, out, n, layout_ == channel_layout::chw,
                                  record_elems_ / params_.channels, params_, stream);
  }

  [[nodiscard]] channel_layout layout() const noexcept { return layout_; }
  [[nodiscard]] std::size_t record_elems() const noexcept { return record_elems_; }
  [[nodiscard]] std::size_t channels() const noexcept { return params_.channels; }
  [[nodiscard]] float scale() const noexcept { return params_.scale; }
  [[nodiscard]] float mean(std::size_t c) const noexcept { return params_.mean[c]; }
  // 1/std[c] as the kernel uses it (for host references).
  [[nodiscard]] float inv_std(std::size_t c) const noexcept { return params_.inv_std[c]; }

 private:
  detail::normalize_params params_;
  channel_layout layout_;
  std::size_t record_elems_;
};

// One-off form: validates like normalizer's constructor, then queues like its operator().
template <normalize_output Out>
void normalize(const std::uint8_t* in, Out* out, std::size_t records, std::size_t record_elems,
               channel_layout layout, std::span<const float> mean, std::span<const float> stddev,
               float scale, cudaStream_t stream) {
  normalizer<Out>(layout, record_elems, mean, stddev, scale)(in, out, records, stream);
}

// The normalizer as a loader transform: reads batch.records fixed-size records of record_elems
// bytes from batch.data and writes the Out results (records * record_elems of them) to
// batch.output. Throws unsupported_error for variable-size records (record_bytes == 0) and
// config_error when record_bytes differs from record_elems or data/output are too small.
template <normalize_output Out>
class normalize_transform {
 public:
  explicit normalize_transform(normalizer<Out> n) : n_(n) {}

  void operator()(const device_batch_view& batch, cudaStream_t stream) const {
    if (batch.record_bytes == 0)
      throw unsupported_error("normalize_transform: records vary in size; normalisation needs "
                              "fixed-size records");
    if (batch.record_bytes != n_.record_elems())
      throw config_error("normalize_transform: batch records have " +
                         std::to_string(batch.record_bytes) + " bytes but the normalizer expects " +
                         std::to_string(n_.record_elems()));
    const std::size_t elems = batch.records * batch.record_bytes;
    if (batch.records != 0 && (elems / batch.records != batch.record_bytes || batch.data_bytes < elems ||
                               batch.output_bytes / sizeof(Out) < elems))
      throw config_error("normalize_transform: batch of " + std::to_string(batch.records) +
                         " records needs " + std::to_string(elems) + " input bytes (has " +
                         std::to_string(batch.data_bytes) + ") and " +
                         std::to_string(elems * sizeof(Out)) + " output bytes (has " +
                         std::to_string(batch.output_bytes) + ")");
    n_(reinterpret_cast<const std::uint8_t*>(batch.data), reinterpret_cast<Out*>(batch.output),
       batch.records, stream);
  }

  [[nodiscard]] const normalizer<Out>& get() const noexcept { return n_; }

 private:
  normalizer<Out> n_;
};

static_assert(device_transform<normalize_transform<float>>);

}  // namespace gpufeed::cuda
