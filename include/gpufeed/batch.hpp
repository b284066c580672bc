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

#include "gpufeed/target.hpp"

namespace gpufeed {

// What the loader does when a record cannot be read (I/O error, corrupt data, ...):
//   throw_error  the batch it broke is delivered as that error: next() rethrows it (default)
//   skip         the record is left out of its batch (the batch is shorter) and logged
//   substitute   the record is replaced by a good record of the same batch (same size) and logged;
//                where none fits, it is skipped
// A failing transform hook fails the whole batch under every policy.
enum class error_policy { throw_error, skip, substitute };

// A record the error policy dropped or replaced, and why.
struct skipped_record {
  std::uint64_t index = 0;          // global record index that failed
  std::uint64_t epoch = 0, batch = 0;
  std::string what;                 // the error's message (names the file and record)
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

// Everything a batch describes, filled by the pipeline at delivery.
struct batch_fields {
  std::uint64_t epoch = 0, number = 0, sequence = 0;
  bool last_in_epoch = false;
  std::size_t records = 0, record_bytes = 0, data_bytes = 0, output_bytes = 0;
  std::byte* data = nullptr;
  std::byte* output = nullptr;
  const std::uint64_t* offsets = nullptr;
  const std::int64_t* labels = nullptr;
  const std::uint64_t* indices = nullptr;
  const std::uint64_t* host_offsets = nullptr;
  const std::int64_t* host_labels = nullptr;
  const std::uint64_t* host_indices = nullptr;
  bool on_device = false;
  int device = -1;
  std::vector<skipped_record> skipped;
};
}  // namespace detail

class batch {
 public:
  batch() noexcept = default;
  batch(std::shared_ptr<detail::batch_owner> owner, std::size_t ticket, stream_handle consumer,
        detail::batch_fields f) noexcept
      : owner_(std::move(owner)), ticket_(ticket), consumer_(consumer), f_(std::move(f)) {}
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

  [[nodiscard]] std::uint64_t epoch() const noexcept { return f_.epoch; }
  [[nodiscard]] std::uint64_t number() const noexcept { return f_.number; }  // within the epoch
  [[nodiscard]] std::uint64_t sequence() const noexcept { return f_.sequence; }  // since start
  [[nodiscard]] bool last_in_epoch() const noexcept { return f_.last_in_epoch; }
  [[nodiscard]] std::size_t size() const noexcept { return f_.records; }
  [[nodiscard]] bool empty() const noexcept { return f_.records == 0; }
  [[nodiscard]] bool on_device() const noexcept { return f_.on_device; }
  [[nodiscard]] int device() const noexcept { return f_.device; }
  // Fixed record size, or 0 when the source's records vary (use offsets()).
  [[nodiscard]] std::size_t record_bytes() const noexcept { return f_.record_bytes; }

  // Target memory (device memory on a device target).
  [[nodiscard]] std::span<std::byte> data() const noexcept { return {f_.data, f_.data_bytes}; }
  [[nodiscard]] std::span<const std::uint64_t> offsets() const noexcept {
    return {f_.offsets, f_.records + 1};
  }
  [[nodiscard]] std::span<const std::int64_t> labels() const noexcept {
    return {f_.labels, f_.labels ? f_.records : 0};
  }
  [[nodiscard]] std::span<const std::uint64_t> indices() const noexcept {
    return {f_.indices, f_.records};
  }
  // The transform output buffer (empty unless the loader was given output_bytes).
  [[nodiscard]] std::span<std::byte> output() const noexcept {
    return {f_.output, f_.output_bytes};
  }
  // Record k's bytes, in target memory.
  [[nodiscard]] std::span<std::byte> record(std::size_t k) const noexcept {
    return {f_.data + f_.host_offsets[k], f_.host_offsets[k + 1] - f_.host_offsets[k]};
  }

  // Host copies of the metadata, valid until release.
  [[nodiscard]] std::span<const std::uint64_t> host_offsets() const noexcept {
    return {f_.host_offsets, f_.records + 1};
  }
  [[nodiscard]] std::span<const std::int64_t> host_labels() const noexcept {
    return {f_.host_labels, f_.host_labels ? f_.records : 0};
  }
  [[nodiscard]] std::span<const std::uint64_t> host_indices() const noexcept {
    return {f_.host_indices, f_.records};
  }
  // Records the error policy dropped or replaced in this batch.
  [[nodiscard]] const std::vector<skipped_record>& skipped() const noexcept { return f_.skipped; }

  void swap(batch& o) noexcept {
    std::swap(owner_, o.owner_);
    std::swap(ticket_, o.ticket_);
    std::swap(consumer_, o.consumer_);
    std::swap(f_, o.f_);
  }

 private:
  std::shared_ptr<detail::batch_owner> owner_;
  std::size_t ticket_ = 0;
  stream_handle consumer_ = nullptr;
  detail::batch_fields f_;
};

}  // namespace gpufeed
