// gpufeed — one delivered batch.
//
// A batch is a move-only lease on one of the loader's slots. Its records are packed back to back
// in data(), record k at [offsets()[k], offsets()[k+1]); for sources of fixed-size records that is
// a contiguous [size(), record_bytes()] array. On a device target data(), offsets(), labels(),
// indices() and output() are device memory, already ordered before the consumer's stream (the
// loader made that stream wait on the batch's ready event); host_offsets(), host_labels() and
// host_indices() are host copies of the same metadata.
//
// Releasing the batch (release() or destruction) records a "consumed" event on the consumer's
// stream; the loader refills the slot only after the device has passed that point, so kernels the
// consumer queued on its stream may keep reading the batch after release() returns. Work on other
// streams must be ordered before the consumer's stream by the consumer itself, or passed as the
// stream to release(stream).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "gpufeed/batch_view.hpp"
#include "gpufeed/error.hpp"

namespace gpufeed {

// A record the error policy dropped or replaced, and why.
struct skipped_record {
  std::uint64_t index = 0;          // global record index that failed
  std::uint64_t epoch = 0, batch = 0;
  std::string what;                 // the error's message (names the file and record)
  std::string input;                // the record's input name (error::input()), "" when unknown
  bool substituted = false;         // replaced by substitute_index instead of dropped
  std::uint64_t substitute_index = 0;
};

namespace detail {
// Implemented by the loader's pipeline; a batch calls it once, on release.
class batch_owner {
 public:
  virtual ~batch_owner() = default;
  virtual void release_batch(std::size_t ticket, stream_handle consumer) noexcept = 0;
};

}  // namespace detail

class batch {
 public:
  batch() noexcept = default;
  // Made by the loader: `view` in target memory, `host` the same batch's metadata in host memory
  // (its data pointer unused); `device` is -1 on the host target.
  batch(std::shared_ptr<detail::batch_owner> owner, std::size_t ticket, stream_handle consumer,
        const batch_view& view, const batch_view& host, int device,
        std::vector<skipped_record> skipped) noexcept
      : owner_(std::move(owner)), ticket_(ticket), consumer_(consumer), view_(view), host_(host),
        device_(device), skipped_(std::move(skipped)) {}
  batch(batch&& o) noexcept { swap(o); }
  batch& operator=(batch&& o) noexcept {
    batch tmp(std::move(o));
    swap(tmp);
    return *this;
  }
  batch(const batch&) = delete;
  batch& operator=(const batch&) = delete;
  ~batch() { release(); }

  // Gives the slot back. `consumer`: the stream whose queued work must finish before the slot is
  // refilled (default: the loader's consumer stream). Idempotent; never throws.
  void release() noexcept { release(consumer_); }
  void release(stream_handle consumer) noexcept {
    if (owner_) {
      owner_->release_batch(ticket_, consumer);
      owner_.reset();
    }
  }
  [[nodiscard]] bool valid() const noexcept { return owner_ != nullptr; }

  [[nodiscard]] std::uint64_t epoch() const noexcept { return view_.epoch; }
  [[nodiscard]] std::uint64_t number() const noexcept { return view_.number; }  // within the epoch
  [[nodiscard]] std::uint64_t sequence() const noexcept { return view_.sequence; }  // since start
  [[nodiscard]] bool last_in_epoch() const noexcept { return view_.last_in_epoch; }
  [[nodiscard]] std::size_t size() const noexcept { return view_.records; }
  [[nodiscard]] bool empty() const noexcept { return view_.records == 0; }
  [[nodiscard]] bool on_device() const noexcept { return view_.on_device; }
  [[nodiscard]] int device() const noexcept { return device_; }
  // Fixed record size, or 0 when the source's records vary (use offsets()).
  [[nodiscard]] std::size_t record_bytes() const noexcept { return view_.record_bytes; }

  // Target memory (device memory on a device target).
  [[nodiscard]] std::span<std::byte> data() const noexcept { return {view_.data, view_.data_bytes}; }
  [[nodiscard]] std::span<const std::uint64_t> offsets() const noexcept {
    return {view_.offsets, view_.records + 1};
  }
  // Labels, one per record: config_error when the loader's source has none (has_labels() false)
  // rather than an empty span a kernel would read as a null pointer.
  [[nodiscard]] bool has_labels() const noexcept { return view_.labels != nullptr; }
  [[nodiscard]] std::span<const std::int64_t> labels() const {
    if (!view_.labels) no_labels();
    return {view_.labels, view_.records};
  }
  [[nodiscard]] std::span<const std::uint64_t> indices() const noexcept {
    return {view_.indices, view_.records};
  }
  // The transform output buffer (empty unless the loader was given output_bytes).
  [[nodiscard]] std::span<std::byte> output() const noexcept {
    return {view_.output, view_.output_bytes};
  }
  // Record k's bytes, in target memory.
  [[nodiscard]] std::span<std::byte> record(std::size_t k) const noexcept {
    return {view_.data + host_.offsets[k], host_.offsets[k + 1] - host_.offsets[k]};
  }

  // Host copies of the metadata, valid until release.
  [[nodiscard]] std::span<const std::uint64_t> host_offsets() const noexcept {
    return {host_.offsets, view_.records + 1};
  }
  [[nodiscard]] std::span<const std::int64_t> host_labels() const {
    if (!host_.labels) no_labels();
    return {host_.labels, view_.records};
  }
  [[nodiscard]] std::span<const std::uint64_t> host_indices() const noexcept {
    return {host_.indices, view_.records};
  }
  // Records the error policy dropped or replaced in this batch.
  [[nodiscard]] const std::vector<skipped_record>& skipped() const noexcept { return skipped_; }

  void swap(batch& o) noexcept {
    std::swap(owner_, o.owner_);
    std::swap(ticket_, o.ticket_);
    std::swap(consumer_, o.consumer_);
    std::swap(view_, o.view_);
    std::swap(host_, o.host_);
    std::swap(device_, o.device_);
    std::swap(skipped_, o.skipped_);
  }

 private:
  [[noreturn]] static void no_labels() {
    throw config_error(
        "this batch has no labels: the loader's source has none (hdf5_source reads the 'labels' "
        "dataset `gpufeed pack --labels` writes, or the one named in hdf5_options::label_dataset; "
        "lmdb_source needs lmdb_options::value_format::datum); check batch::has_labels()");
  }

  std::shared_ptr<detail::batch_owner> owner_;
  std::size_t ticket_ = 0;
  stream_handle consumer_ = nullptr;
  batch_view view_;  // target memory
  batch_view host_;  // host copies of offsets, labels and indices
  int device_ = -1;
  std::vector<skipped_record> skipped_;
};

}  // namespace gpufeed
