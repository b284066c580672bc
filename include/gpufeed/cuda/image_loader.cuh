// gpufeed::cuda — a loader of JPEG (and PNG) records whose batches arrive in GPU memory as
// cropped, flipped and normalised images, decoded by nvJPEG (hardware engines where present)
// with TurboJPEG beside it: the GPU form of a loader with image::random_resized_crop_transform.
//
//   cuda::image_loader_config c;
//   c.loader.batch_size = 256;  c.loader.workers = 4;        // order, seed, epochs, on_error...
//   c.decode = {.size = 224, .layout = image::pixel_layout::chw, .dtype = cuda::jpeg_dtype::f16,
//               .normalize = {1 / 255.f, {0.485f, 0.456f, 0.406f}, {1 / .229f, 1 / .224f, 1 / .225f}}};
//   cuda::image_loader<hdf5_source> images(src, c);
//   while (auto b = images.next(stream)) {   // b->data(): b->size() records of b->record_bytes()
//     model_step(b->data(), b->size(), stream);  // queued after the batch is ready
//   }                                           // b released: its memory is reused after `stream`
//
// Contracts:
// - The loader's workers read each record's bytes (no decode on them: loader_config::target and
//   per_record are ignored); next() copies them into pinned memory and queues the decode and the
//   fused crop on this loader's stream, on which the batch's ready event is recorded, and makes
//   `consumer` wait for it. Decoding on the GPU overlaps the consumer's earlier work.
// - Records and order are the loader's: every record once per epoch, in the sampler's order;
//   state() resumes after the last batch next() returned. Crops and flips are drawn from
//   record_rng(seed, epoch, record), as the CPU transform's are in the loader's workers.
// - A record that fails to decode (corrupt_error, format_error, unsupported_error naming its
//   shard and record) meets loader_config::on_error: throw_error rethrows it from next() (the
//   batch is not delivered; the next call goes on with the next batch); skip leaves it out (the
//   later records move up); substitute copies the batch's first good record into its place;
//   either way batch.skipped() lists it. Errors of the read itself are the loader's.
// - Memory: `in_flight` device batches of batch_size x record_bytes() and their pinned JPEG
//   bytes. A batch's memory is reused by the in_flight-th next() after it, once the batch has
//   been released and the consumer stream has passed its release point; holding more than
//   in_flight - 1 batches across a next() is a config_error.
// - Not thread-safe: one consumer thread.
#pragma once

#include <cuda_runtime_api.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "gpufeed/batch.hpp"
#include "gpufeed/cuda/detail/image_slots.hpp"
#include "gpufeed/cuda/jpeg_decode.cuh"
#include "gpufeed/cuda/stream.hpp"
#include "gpufeed/detail/error_class.hpp"
#include "gpufeed/loader.hpp"
#include "gpufeed/source.hpp"

namespace gpufeed::cuda {

struct image_loader_config {
  loader_config loader;         // batch size, order, seed, epochs, workers, prefetch, on_error
  jpeg_decode_options decode;   // size, layout, dtype, normalisation, host threads, backend
  std::size_t in_flight = 3;    // device batches: decoding, held by the consumer, and spare
};

// What the decoders did since the loader started.
struct image_loader_stats {
  std::uint64_t images = 0, decoded_gpu = 0, decoded_cpu = 0, moved_to_cpu = 0, failed = 0;
  // The consuming thread's seconds in next(): waiting for the loader's batch and for a free
  // slot; copying the JPEG bytes to pinned memory; in the decoder (of which reading headers,
  // inside nvjpegDecodeBatched, and the host route: jpeg_batch_result).
  double wait_seconds = 0, copy_seconds = 0, decode_seconds = 0;
  double plan_seconds = 0, submit_seconds = 0, host_seconds = 0;
};

// One batch of images in device memory; move-only; releases itself when destroyed.
class image_batch {
 public:
  image_batch() = default;
  image_batch(std::shared_ptr<detail::image_slots> slots, std::size_t slot, cudaStream_t consumer)
      : slots_(std::move(slots)), slot_(slot), consumer_(consumer) {}
  image_batch(image_batch&& o) noexcept { swap(o); }
  image_batch& operator=(image_batch&& o) noexcept {
    image_batch t(std::move(o));
    swap(t);
    return *this;
  }
  image_batch(const image_batch&) = delete;
  image_batch& operator=(const image_batch&) = delete;
  ~image_batch() { release(); }

  // Gives the memory back once `consumer`'s work queued so far has run (default: the stream
  // next() was given).
  void release() noexcept { release(consumer_); }
  void release(cudaStream_t consumer) noexcept {
    if (slots_) slots_->release(slot_, consumer);
    slots_.reset();
  }

  [[nodiscard]] void* data() const noexcept { return meta().device; }
  [[nodiscard]] std::size_t size() const noexcept { return meta().indices.size(); }
  [[nodiscard]] std::size_t record_bytes() const noexcept { return slots_->record_bytes(); }
  [[nodiscard]] std::span<const std::uint64_t> indices() const noexcept { return meta().indices; }
  [[nodiscard]] bool has_labels() const noexcept { return meta().has_labels; }
  [[nodiscard]] std::span<const std::int64_t> labels() const noexcept { return meta().labels; }
  [[nodiscard]] std::uint64_t epoch() const noexcept { return meta().epoch; }
  [[nodiscard]] std::uint64_t number() const noexcept { return meta().number; }
  [[nodiscard]] bool last_in_epoch() const noexcept { return meta().last_in_epoch; }
  [[nodiscard]] const std::vector<skipped_record>& skipped() const noexcept { return meta().skipped; }
  // Recorded on the loader's stream once the batch's records are written.
  [[nodiscard]] cudaEvent_t ready() const noexcept { return meta().ready.get(); }

  void swap(image_batch& o) noexcept {
    std::swap(slots_, o.slots_);
    std::swap(slot_, o.slot_);
    std::swap(consumer_, o.consumer_);
  }

 private:
  [[nodiscard]] const detail::image_slot& meta() const noexcept { return slots_->at(slot_); }

  std::shared_ptr<detail::image_slots> slots_;
  std::size_t slot_ = 0;
  cudaStream_t consumer_ = nullptr;
};

template <class Source>
class image_loader {
 public:
  image_loader(const Source& src, image_loader_config c)
      : c_(c), src_(&src), loader_(src, host_config(c.loader)), decoder_(c.decode),
        slots_(std::make_shared<detail::image_slots>(c.in_flight, c.loader.batch_size,
                                                     decoder_.record_bytes())),
        seed_(loader_.state().seed) {}

  // The next batch, queued for decoding; `consumer` waits for it (nullopt after the last epoch).
  std::optional<image_batch> next(cudaStream_t consumer = nullptr) {
    for (;;) {
      // The slot first: a config_error for holding too many batches must not lose a batch.
      const auto t0 = std::chrono::steady_clock::now();
      const std::size_t k = slots_->acquire();  // waits for the consumer to pass its release
      std::optional<batch> b;
      try {
        b = loader_.next();
        stats_.wait_seconds += seconds_since(t0);
      } catch (...) {
        slots_->release(k, stream_);
        throw;
      }
      if (!b) {
        slots_->release(k, stream_);
        return std::nullopt;
      }
      detail::image_slot& s = slots_->at(k);
      std::vector<jpeg_item> items;
      std::vector<record_rng> rngs;
      try {
        const auto t1 = std::chrono::steady_clock::now();
        s.fill(*b);
        items = s.stage(*b, [this](std::uint64_t i) { return where(i); });
        b.reset();  // the loader's slot goes back to its workers
        stats_.copy_seconds += seconds_since(t1);
        rngs.reserve(items.size());
        for (std::size_t i = 0; i < items.size(); ++i) rngs.emplace_back(seed_, s.epoch, s.indices[i]);
        const auto t2 = std::chrono::steady_clock::now();
        const jpeg_batch_result r = decoder_.decode(items, rngs, s.device, stream_);
        stats_.decode_seconds += seconds_since(t2);
        count(r, items.size());
        if (r.failed > 0) {
          std::vector<std::exception_ptr> errors = r.errors;
          for (std::size_t i = 0; i < errors.size(); ++i)
            if (errors[i]) errors[i] = named(errors[i], s.indices[i]);
          if (c_.loader.on_error == error_policy::throw_error)
            for (const auto& e : errors)
              if (e) std::rethrow_exception(e);
          s.settle(errors, decoder_.record_bytes(), c_.loader.on_error == error_policy::substitute,
                   stream_);
        }
      } catch (...) {
        slots_->release(k, stream_);  // reused once the work queued for it has run
        throw;
      }
      if (s.indices.empty()) {  // every record skipped: nothing to deliver
        slots_->release(k, stream_);
        continue;
      }
      s.ready.record(stream_);
      GPUFEED_CUDA_TRY(cudaStreamWaitEvent(consumer, s.ready.get(), 0));
      return image_batch(slots_, k, consumer);
    }
  }

  [[nodiscard]] sampler_state state() const { return loader_.state(); }
  [[nodiscard]] loader_stats stats() const { return loader_.stats(); }
  [[nodiscard]] const image_loader_stats& image_stats() const noexcept { return stats_; }
  [[nodiscard]] std::size_t record_bytes() const noexcept { return decoder_.record_bytes(); }
  [[nodiscard]] const image::nvjpeg_capability& capability() const noexcept {
    return decoder_.capability();
  }
  [[nodiscard]] std::uint64_t batches_per_epoch() const noexcept {
    return loader_.batches_per_epoch();
  }

 private:
  static loader_config host_config(loader_config c) {
    c.target = target::host();  // the workers only read
    c.per_record = {};
    c.transform = {};
    c.transform_output_bytes = 0;
    return c;
  }

  // Names record i by its shard and index. Its input name costs a read of the shard's names
  // table, so only a failed record gets one (named).
  error_context where(std::uint64_t i) const {
    error_context c;
    c.record = i;
    if constexpr (file_naming_source<Source>) c.file = std::filesystem::path(src_->file_of(i)).string();
    return c;
  }

  // `e` (record i's decode failure) with the record's input name, as the workers name it.
  std::exception_ptr named(std::exception_ptr e, std::uint64_t i) const {
    std::string input;
    if constexpr (record_naming_source<Source>) {
      try {
        if (auto n = src_->name_of(i)) input = std::move(*n);
      } catch (...) {  // a name is a courtesy: the record and shard still identify it
      }
    }
    if (input.empty()) return e;
    try {
      std::rethrow_exception(e);
    } catch (const error& x) {
      if (!x.input().empty()) return e;
      error_context c = x.context();
      c.input = std::move(input);
      return gpufeed::detail::with_context(x, std::move(c));
    } catch (...) {
      return e;
    }
  }

  static double seconds_since(std::chrono::steady_clock::time_point t) noexcept {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
  }

  void count(const jpeg_batch_result& r, std::size_t n) noexcept {
    stats_.images += n - r.failed;
    stats_.decoded_gpu += r.gpu;
    stats_.decoded_cpu += r.cpu;
    stats_.moved_to_cpu += r.moved;
    stats_.failed += r.failed;
    stats_.plan_seconds += r.plan_seconds;
    stats_.submit_seconds += r.submit_seconds;
    stats_.host_seconds += r.host_seconds;
  }

  image_loader_config c_;
  const Source* src_;
  loader<Source> loader_;
  jpeg_batch_decoder decoder_;
  std::shared_ptr<detail::image_slots> slots_;
  stream stream_;
  std::uint64_t seed_ = 0;
  image_loader_stats stats_;
};

}  // namespace gpufeed::cuda
