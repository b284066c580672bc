// gpufeed::cuda — JPEG records decoded on the GPU with nvJPEG's batched API, then cropped,
// resized, flipped and normalised by one fused kernel straight into a batch's device records:
// the GPU form of image::random_resized_crop_transform / center_crop_transform.
//
//   gpufeed::cuda::jpeg_batch_decoder dec({.size = 224, .dtype = cuda::jpeg_dtype::f16});
//   auto r = dec.decode(items, rngs, out, stream);  // items: JPEG bytes in pinned memory
//   for (auto& e : r.errors) if (e) ...              // the loader's error policy per record
//
// Contracts:
// - Record i of the output (out + i * record_bytes()) is size x size x 3 in `layout`, of
//   `dtype`: u8 is exactly what the CPU transform writes for the same pixels at full-size decode
//   (dct_scaling = false); f32 / f16 / bf16 are those bytes through cuda::normalizer's formula
//   (detail/image/crop_sample.hpp). The pixels themselves come from nvJPEG, whose IDCT and
//   upsampling differ slightly from TurboJPEG's (see docs/design.md, GPU JPEG decode).
// - Crops are torchvision's, drawn from rngs[i] (the record's record_rng) in train_crop's order:
//   the box on the full image, then the flip; eval mode draws nothing.
// - Routing (detail/image/nvjpeg_batch_plan.hpp): each header is read and bounded (max_pixels)
//   before anything is allocated for it; JPEGs the backend cannot take are decoded by TurboJPEG
//   on host_threads threads (this one among them) while the GPU decodes the others, uploaded,
//   then cropped by the same kernel. With host_share, those threads also take some of the
//   GPU's JPEGs when they would otherwise finish first (detail/image/decode_split.hpp: the share
//   follows the seconds per image each decoder took on the batches before; the output is the
//   same whichever decoder takes an image, up to nvJPEG's and TurboJPEG's pixel differences).
//   When nvjpegDecodeBatched
//   rejects a chunk's bytes (a corrupt JPEG that passed the header read), the whole chunk is
//   decoded on the CPU instead, which names the bad record. Without nvJPEG (or without a working
//   backend) every JPEG takes the CPU route: the output is the same.
// - Errors: a record's fault (corrupt_error, unsupported_error, format_error naming its shard
//   and record) is returned in errors[i] and its output record is left unwritten; every other
//   record of the batch is written. nvJPEG's or CUDA's own failures throw (library_error,
//   cuda_error); then no record may be relied on.
// - Memory: decoded pixels are held on the device for at most device_budget bytes at once (a
//   batch needing more is decoded in chunks, each waiting for the last); one image over the
//   budget is a config_error at construction (max_pixels * 3 must fit).
// - Asynchrony: decode() returns once the work is queued on `stream`; items' bytes and `out`
//   must stay valid until it has run. The next decode() waits for the previous one's uploads.
//   Not thread-safe: one decoder per submitting thread.
#pragma once

#include <cuda_runtime_api.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <span>
#include <string>
#include <vector>

#include "gpufeed/cuda/check.hpp"
#include "gpufeed/cuda/detail/crop_kernels.cuh"
#include "gpufeed/cuda/detail/staging.hpp"
#include "gpufeed/cuda/event.hpp"
#include "gpufeed/detail/image/host_route.hpp"
#include "gpufeed/detail/image/nvjpeg_batch_plan.hpp"
#include "gpufeed/detail/image/nvjpeg_handles.hpp"
#include "gpufeed/image/crop_decode.hpp"
#include "gpufeed/image/nvjpeg_probe.hpp"
#include "gpufeed/record_transform.hpp"

namespace gpufeed::cuda {

using jpeg_dtype = gpufeed::detail::image::crop_dtype;
using jpeg_item = gpufeed::detail::image::nvjpeg::batch_item;

struct jpeg_decode_options {
  int size = 224;                                   // output: size x size x 3
  image::pixel_layout layout = image::pixel_layout::hwc;
  jpeg_dtype dtype = jpeg_dtype::u8;
  gpufeed::detail::image::crop_normalize normalize{};  // f32 / f16 / bf16: mean, 1/std, scale
  bool train = true;                                // RandomResizedCrop + flip; else eval crop
  image::random_resized_crop_options crop{};
  bool flip = true;
  int resize = 256;                                 // eval: Resize(resize) + CenterCrop(size)
  std::uint64_t max_pixels = 178956970;             // decoder_options' bound per image
  std::size_t device_budget = std::size_t{1} << 30; // decoded pixels on the device at once
  image::nvjpeg_backend backend = image::nvjpeg_backend::hardware;  // preferred; none: CPU only
  // Threads, the caller's among them, that decode the images nvJPEG cannot take (TurboJPEG)
  // while the GPU decodes the rest of the batch.
  std::size_t host_threads = 4;
  // Those threads also decode a share of the GPU's images, sized so both finish together.
  bool host_share = true;
};

struct jpeg_batch_result {
  std::vector<std::exception_ptr> errors;  // per item: null when its record was written
  std::size_t gpu = 0, cpu = 0, failed = 0;  // how the items were decoded
  std::size_t moved = 0;  // of cpu: images the GPU could take, decoded on the host to share work
  // Where this thread's time went: reading and routing the headers; inside nvjpegDecodeBatched;
  // the host route (its decodes, with the GPU submission running on this thread meanwhile).
  double plan_seconds = 0, submit_seconds = 0, host_seconds = 0;
};

class jpeg_batch_decoder {
  using route = gpufeed::detail::image::nvjpeg::route;
  using planned = gpufeed::detail::image::nvjpeg::planned_image;

 public:
  explicit jpeg_batch_decoder(jpeg_decode_options o = {})
      : o_(o),
        host_(o.host_threads, o.host_share, image::decoder_options{o.max_pixels}),
        pixels_(o.device_budget, "jpeg_batch_decoder device pixels"),
        staging_(o.device_budget, "jpeg_batch_decoder CPU-fallback staging") {
    if (o.size <= 0 || (!o.train && o.resize <= 0))
      throw config_error("jpeg_batch_decoder: size and resize must be positive");
    if (o.max_pixels * 3 + align > o.device_budget)
      throw config_error("jpeg_batch_decoder: device_budget " + std::to_string(o.device_budget) +
                         " bytes cannot hold one image of max_pixels (" +
                         std::to_string(o.max_pixels) + ") x 3");
    if (o.backend == image::nvjpeg_backend::none) return;
    cap_ = image::probe_nvjpeg(o.backend);
    if (!cap_.gpu_decode()) return;
    namespace nv = gpufeed::detail::image::nvjpeg;
    lib_ = nv::library::load();
    h_ = nv::create_handle(lib_, image::detail_probe::to_nvjpeg(cap_.backend));
    state_ = nv::create_jpeg_state(lib_, h_.get());
  }

  // Which nvJPEG backend decodes (none: every JPEG on the CPU), and the probe's notice.
  [[nodiscard]] const image::nvjpeg_capability& capability() const noexcept { return cap_; }
  [[nodiscard]] std::size_t record_bytes() const noexcept {
    return static_cast<std::size_t>(o_.size) * static_cast<std::size_t>(o_.size) * 3 *
           gpufeed::detail::image::crop_dtype_size(o_.dtype);
  }

  // Decodes items[i] into record i of `out` (device memory, items.size() records). rngs: one per
  // item in train mode (drawn from), ignored (may be empty) in eval mode.
  jpeg_batch_result decode(std::span<const jpeg_item> items, std::span<record_rng> rngs,
                           void* out, cudaStream_t stream) {
    if (o_.train && rngs.size() < items.size())
      throw config_error("jpeg_batch_decoder: one record_rng per item is needed in train mode");
    if (items.size() > 65535) throw config_error("jpeg_batch_decoder: more than 65535 items");
    jpeg_batch_result r;
    r.errors.resize(items.size());
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<planned> plan =
        gpu_ready() ? host_.plan(lib_, h_.get(), items, {o_.max_pixels, cap_.hardware()})
                    : host_.plan_on_cpu(items);
    r.plan_seconds = seconds_since(t0);
    std::vector<std::size_t> chunk;
    std::size_t bytes = 0;
    for (std::size_t i = 0; i <= items.size(); ++i) {
      const std::size_t need = i < items.size() ? aligned(decoded_bytes(plan[i])) : 0;
      if (i == items.size() || (bytes + need > o_.device_budget && !chunk.empty())) {
        run_chunk(items, rngs, plan, chunk, out, stream, r);
        chunk.clear();
        bytes = 0;
      }
      if (i < items.size() && plan[i].to != route::failed) {
        chunk.push_back(i);
        bytes += need;
      }
    }
    for (std::size_t i = 0; i < items.size(); ++i) {
      if (plan[i].to == route::failed && !r.errors[i]) r.errors[i] = plan[i].error;
      if (r.errors[i]) ++r.failed;
    }
    return r;
  }

 private:
  static constexpr std::size_t align = 256;
  static std::size_t aligned(std::size_t n) noexcept { return (n + align - 1) / align * align; }
  [[nodiscard]] bool gpu_ready() const noexcept { return state_.get() != nullptr; }
  static double seconds_since(std::chrono::steady_clock::time_point t) noexcept {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
  }
  static std::size_t decoded_bytes(const planned& p) noexcept {
    return gpufeed::detail::image::nvjpeg::decoded_bytes(p);
  }

  // The box and flip of item i on its w x h decode, as train_crop / eval_crop draw them.
  gpufeed::detail::image::crop_geometry geometry(std::span<record_rng> rngs, std::size_t i, int w,
                                                 int h) const {
    image::crop_box b;
    bool flip = false;
    if (o_.train) {
      b = image::random_resized_crop_box(w, h, rngs[i], o_.crop);
      flip = o_.flip && image::coin(rngs[i]);
    } else {
      b = image::resize_center_crop_box(w, h, o_.resize, o_.size);
    }
    return gpufeed::detail::image::make_crop_geometry(w, h, b.x, b.y, b.width, b.height, o_.size,
                                                      o_.size, flip);
  }

  // Batched GPU decode of the chunk's GPU items at their offsets; false when nvJPEG rejected the
  // bytes of one of them (then nothing of it is used: the items go to the CPU).
  bool decode_gpu(std::span<const jpeg_item> items, const std::vector<std::size_t>& gpu,
                  const std::vector<planned>& plan, const std::vector<std::size_t>& at,
                  std::byte* base, cudaStream_t stream) {
    namespace nv = gpufeed::detail::image::nvjpeg;
    if (gpu.empty()) return true;
    std::vector<const unsigned char*> data;
    std::vector<std::size_t> lengths;
    std::vector<nv::image_planes> planes(gpu.size());
    for (std::size_t k = 0; k < gpu.size(); ++k) {
      const std::size_t i = gpu[k];
      data.push_back(reinterpret_cast<const unsigned char*>(items[i].bytes.data()));
      lengths.push_back(items[i].bytes.size());
      std::memset(&planes[k], 0, sizeof planes[k]);
      planes[k].channel[0] = reinterpret_cast<unsigned char*>(base + at[i]);
      planes[k].pitch[0] = static_cast<std::size_t>(plan[i].width) * 3;
    }
    const int n = static_cast<int>(gpu.size());
    if (n != initialized_) {
      nv::check(lib_.api().decode_batched_initialize(h_.get(), state_.get(), n, 1,
                                                     nv::output_format::rgbi),
                "nvjpegDecodeBatchedInitialize");
      initialized_ = n;
    }
    gpu_start_.record(stream);
    const nv::status s = lib_.api().decode_batched(h_.get(), state_.get(), data.data(),
                                                   lengths.data(), planes.data(), stream);
    gpu_stop_.record(stream);
    if (s == nv::status::bad_jpeg || s == nv::status::incomplete_bitstream ||
        s == nv::status::jpeg_not_supported) {
      initialized_ = 0;  // initialise the state afresh for the next batch
      return false;
    }
    nv::check(s, "nvjpegDecodeBatched");
    return true;
  }

  void run_chunk(std::span<const jpeg_item> items, std::span<record_rng> rngs,
                 std::vector<planned>& plan, const std::vector<std::size_t>& chunk, void* out,
                 cudaStream_t stream, jpeg_batch_result& r) {
    if (chunk.empty()) return;
    if (pending_) {  // the last chunk's buffers are about to be reused; learn its GPU time
      uploaded_.synchronize();
      learn_gpu();
    }
    pending_ = false;
    std::vector<std::size_t> at(items.size()), gpu, cpu;
    std::size_t bytes = 0;
    for (const std::size_t i : chunk) {
      at[i] = bytes;
      bytes += aligned(decoded_bytes(plan[i]));
      (plan[i].to == route::gpu ? gpu : cpu).push_back(i);
    }
    const std::size_t forced = cpu.size();
    for (std::size_t k = host_.split().moved(forced, gpu.size()); k > 0; --k) {
      cpu.push_back(gpu.back());
      gpu.pop_back();
    }
    std::byte* base = pixels_.reserve(bytes);
    // CPU route (detail/image/host_route.hpp): TurboJPEG into pinned staging on the host
    // threads, then uploaded to the image's offset. This thread submits the GPU decode while the
    // others decode (nvjpegDecodeBatched may hold its caller until the engines are done).
    std::byte* host = cpu.empty() ? nullptr : staging_.reserve(bytes);
    std::vector<std::array<int, 2>> size(items.size());
    bool accepted = true;
    const auto t0 = std::chrono::steady_clock::now();
    host_.decode(items, plan, cpu, forced, at, align, host, size, r.errors, [&] {
      const auto t1 = std::chrono::steady_clock::now();
      accepted = decode_gpu(items, gpu, plan, at, base, stream);
      last_submit_ = seconds_since(t1);
    });
    r.submit_seconds += last_submit_;
    r.host_seconds += seconds_since(t0);
    last_gpu_ = accepted ? gpu.size() : 0;
    if (!accepted) {  // nvJPEG rejected a JPEG of the chunk: its GPU images go to the CPU too
      for (const std::size_t i : gpu) plan[i].why = "nvjpegDecodeBatched rejected its chunk";
      if (host == nullptr) host = staging_.reserve(bytes);
      host_.decode(items, plan, gpu, gpu.size(), at, align, host, size, r.errors, [] {});
      cpu.insert(cpu.end(), gpu.begin(), gpu.end());
      gpu.clear();
    }
    std::vector<cuda::detail::crop_job> jobs;
    for (const std::size_t i : gpu) jobs.push_back(job(rngs, i, plan[i].width, plan[i].height, base + at[i]));
    for (const std::size_t i : cpu) {
      if (r.errors[i]) continue;
      const std::size_t n = static_cast<std::size_t>(size[i][0]) * size[i][1] * 3;
      GPUFEED_CUDA_TRY(cudaMemcpyAsync(base + at[i], host + at[i], n, cudaMemcpyHostToDevice, stream));
      jobs.push_back(job(rngs, i, size[i][0], size[i][1], base + at[i]));
    }
    r.gpu += gpu.size();
    r.cpu += jobs.size() - gpu.size();
    if (accepted)
      for (std::size_t k = forced; k < cpu.size(); ++k) r.moved += r.errors[cpu[k]] ? 0 : 1;
    if (jobs.empty()) return;
    const std::size_t job_bytes = jobs.size() * sizeof(cuda::detail::crop_job);
    std::byte* jh = job_host_.reserve(job_bytes);
    std::memcpy(jh, jobs.data(), job_bytes);
    std::byte* jd = job_device_.reserve(job_bytes);
    GPUFEED_CUDA_TRY(cudaMemcpyAsync(jd, jh, job_bytes, cudaMemcpyHostToDevice, stream));
    cuda::detail::crop_launch p;
    p.out_w = o_.size;
    p.out_h = o_.size;
    p.record_bytes = record_bytes();
    p.normalize = o_.normalize;
    cuda::detail::launch_crop(reinterpret_cast<const cuda::detail::crop_job*>(jd),
                              static_cast<std::uint32_t>(jobs.size()), out, o_.dtype,
                              o_.layout == image::pixel_layout::chw, p, stream);
    uploaded_.record(stream);
    pending_ = true;
  }

  // The last chunk's GPU seconds per image: its decode's span on the stream, or the time
  // nvjpegDecodeBatched held this thread, whichever is longer.
  void learn_gpu() {
    if (last_gpu_ == 0) return;
    const double on_stream = event::elapsed_ms(gpu_start_, gpu_stop_) / 1e3;
    host_.split().record_gpu(last_gpu_, std::max(on_stream, last_submit_));
  }

  cuda::detail::crop_job job(std::span<record_rng> rngs, std::size_t i, int w, int h,
                             const std::byte* pixels) const {
    cuda::detail::crop_job j;
    j.src.plane[0] = reinterpret_cast<const std::uint8_t*>(pixels);
    j.src.pitch[0] = static_cast<std::size_t>(w) * 3;
    j.src.width = w;
    j.src.height = h;
    j.src.interleaved = true;
    j.geometry = geometry(rngs, i, w, h);
    j.record = static_cast<std::uint32_t>(i);
    return j;
  }

  jpeg_decode_options o_;
  image::nvjpeg_capability cap_;
  gpufeed::detail::image::nvjpeg::library lib_{std::vector<std::string>{}};
  gpufeed::detail::image::nvjpeg::handle h_;  // before the state: destroyed after it
  gpufeed::detail::image::nvjpeg::jpeg_state state_;
  int initialized_ = 0;  // the batch size nvjpegDecodeBatchedInitialize was last called with
  gpufeed::detail::image::host_route host_;
  detail::growing_buffer<device_buffer> pixels_;
  detail::growing_buffer<pinned_buffer> staging_;
  detail::growing_buffer<pinned_buffer> job_host_;
  detail::growing_buffer<device_buffer> job_device_;
  event uploaded_;
  event gpu_start_{event::timing::enabled}, gpu_stop_{event::timing::enabled};
  bool pending_ = false;
  std::size_t last_gpu_ = 0;  // GPU images of the last chunk (0: none decoded there)
  double last_submit_ = 0;    // seconds nvjpegDecodeBatched held this thread, last chunk
};

}  // namespace gpufeed::cuda
