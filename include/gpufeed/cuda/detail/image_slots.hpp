// gpufeed::cuda::detail — the batches of a cuda::image_loader: each slot holds one batch's
// images in device memory, its JPEG bytes in pinned memory (read by the GPU decode and the
// uploads), its metadata on the host, and two events: ready (its records are written, on the
// loader's stream) and released (the consumer's stream has passed the batch's release, or the
// loader's stream its abandonment). Slots are used in turn; a slot is reused only after its
// released event has completed.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <span>
#include <string>
#include <vector>

#include "gpufeed/batch.hpp"
#include "gpufeed/cuda/check.hpp"
#include "gpufeed/cuda/device_buffer.hpp"
#include "gpufeed/cuda/event.hpp"
#include "gpufeed/cuda/pinned.hpp"
#include "gpufeed/detail/image/nvjpeg_batch_plan.hpp"
#include "gpufeed/detail/loader/error_policy.hpp"
#include "gpufeed/error.hpp"

namespace gpufeed::cuda::detail {

// Copies the JPEG records of host batch `b` into `pin` (made larger, with a quarter to spare,
// when they do not fit) and lists them there: item k is record k's bytes, named where_of(k).
template <class Where>
std::vector<gpufeed::detail::image::nvjpeg::batch_item> stage_jpegs(const batch& b,
                                                                    pinned_buffer& pin,
                                                                    Where&& where_of) {
  const auto data = b.data();
  if (pin.size() < data.size()) {
    pin = pinned_buffer();  // the old one freed before the new one is made
    pin = pinned_buffer(data.size() + data.size() / 4);
  }
  std::memcpy(pin.data(), data.data(), data.size());
  const auto off = b.host_offsets();
  std::vector<gpufeed::detail::image::nvjpeg::batch_item> items(b.size());
  for (std::size_t k = 0; k < items.size(); ++k) {
    items[k].bytes = {pin.data() + off[k], static_cast<std::size_t>(off[k + 1] - off[k])};
    items[k].where = where_of(k);
  }
  return items;
}

struct image_slot {
  device_buffer memory;
  void* device = nullptr;  // memory.data(): batch_size records of record_bytes
  pinned_buffer jpegs;     // the batch's encoded bytes, back to back
  std::vector<std::uint64_t> indices;
  std::vector<std::int64_t> labels;
  bool has_labels = false;
  std::uint64_t epoch = 0, number = 0;
  bool last_in_epoch = false;
  std::vector<skipped_record> skipped;
  event ready, released;
  bool held = false, recorded = false;  // held by an image_batch; released recorded at least once

  // Takes the host batch's metadata.
  void fill(const batch& b) {
    const auto ix = b.host_indices();
    indices.assign(ix.begin(), ix.end());
    has_labels = b.has_labels();
    if (has_labels) {
      const auto lb = b.host_labels();
      labels.assign(lb.begin(), lb.end());
    } else {
      labels.clear();
    }
    epoch = b.epoch();
    number = b.number();
    last_in_epoch = b.last_in_epoch();
    skipped = b.skipped();
  }

  // Copies the host batch's records into `jpegs`; item i names record i with where_of(index).
  template <class Where>
  std::vector<gpufeed::detail::image::nvjpeg::batch_item> stage(const batch& b, Where&& where_of) {
    return stage_jpegs(b, jpegs, [&](std::size_t k) { return where_of(indices[k]); });
  }

  // Leaves out (substitute = false) or replaces with the first good record (substitute = true)
  // every record with an error, on `stream`; lists each in `skipped`. Returns with the
  // metadata matching the records left.
  void settle(std::span<const std::exception_ptr> errors, std::size_t record_bytes, bool substitute,
              cudaStream_t stream) {
    std::size_t good = errors.size();
    for (std::size_t i = 0; i < errors.size() && good == errors.size(); ++i)
      if (!errors[i]) good = i;
    auto* base = static_cast<std::byte*>(device);
    std::size_t kept = 0;
    for (std::size_t i = 0; i < errors.size(); ++i) {
      if (errors[i]) {
        skipped_record r;
        r.index = indices[i];
        r.epoch = epoch;
        r.batch = number;
        r.what = gpufeed::detail::loading::describe(errors[i]);
        r.input = gpufeed::detail::loading::input_of(errors[i]);
        r.substituted = substitute && good < errors.size();
        r.substitute_index = r.substituted ? indices[good] : 0;
        skipped.push_back(std::move(r));
        if (!skipped.back().substituted) continue;
        GPUFEED_CUDA_TRY(cudaMemcpyAsync(base + kept * record_bytes, base + good * record_bytes,
                                         record_bytes, cudaMemcpyDeviceToDevice, stream));
        indices[kept] = indices[good];
        if (has_labels) labels[kept] = labels[good];
      } else {
        if (kept != i)
          GPUFEED_CUDA_TRY(cudaMemcpyAsync(base + kept * record_bytes, base + i * record_bytes,
                                           record_bytes, cudaMemcpyDeviceToDevice, stream));
        indices[kept] = indices[i];
        if (has_labels) labels[kept] = labels[i];
      }
      ++kept;
    }
    indices.resize(kept);
    if (has_labels) labels.resize(kept);
  }

};

class image_slots {
 public:
  image_slots(std::size_t count, std::size_t batch_size, std::size_t record_bytes)
      : slots_(count < 2 ? 2 : count), record_bytes_(record_bytes) {
    for (image_slot& s : slots_) {
      s.memory = device_buffer(batch_size * record_bytes);
      s.device = s.memory.data();
    }
  }

  [[nodiscard]] std::size_t record_bytes() const noexcept { return record_bytes_; }
  [[nodiscard]] image_slot& at(std::size_t k) noexcept { return slots_[k]; }
  [[nodiscard]] const image_slot& at(std::size_t k) const noexcept { return slots_[k]; }

  // The next slot in turn, once its last batch was released and its stream passed that point.
  std::size_t acquire() {
    const std::size_t k = next_;
    image_slot& s = slots_[k];
    if (s.held)
      throw config_error("cuda::image_loader: more than in_flight - 1 (" +
                         std::to_string(slots_.size() - 1) +
                         ") batches held across next(); release one first or raise in_flight");
    if (s.recorded) s.released.synchronize();
    next_ = (next_ + 1) % slots_.size();
    s.held = true;
    return k;
  }

  // The batch in slot k is given back once `stream`'s work queued so far has run.
  void release(std::size_t k, cudaStream_t stream) noexcept {
    image_slot& s = slots_[k];
    GPUFEED_CUDA_LOG(cudaEventRecord(s.released.get(), stream));
    s.recorded = true;
    s.held = false;
  }

 private:
  std::vector<image_slot> slots_;
  std::size_t record_bytes_;
  std::size_t next_ = 0;
};

}  // namespace gpufeed::cuda::detail
