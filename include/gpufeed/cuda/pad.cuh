// gpufeed::cuda — variable-length records to a padded [records, max_len] batch plus lengths.
//
// Input: a packed batch in device memory — bytes `data[0, bytes)` and records + 1 uint64 byte
// offsets, record i being data[offsets[i], offsets[i+1]) (offsets[0] need not be 0). Output: row
// i of `max_len` elements holds record i's first min(length_i, max_len) elements followed by the
// pad element; lengths[i] = min(length_i, max_len) in elements, as std::uint32_t (half the bytes
// of uint64, and what masks and attention kernels take; max_len is therefore at most 2^32 - 1).
// Records longer than max_len are truncated and counted.
//
// Elements: a padder pads in units of element_bytes (1, 2, 4 or 8; e.g. 4 for int32 token ids),
// offsets stay in bytes and lengths count elements. A record whose byte count is not a multiple
// of element_bytes, whose offsets decrease, or which reaches past `bytes` is malformed. That can
// only be seen on the device, so it is reported there: pad_status counts malformed records and
// keeps the first one's index, the row gets the record's whole elements (none for bad offsets),
// and check_pad_status() turns the status, once the caller has it on the host, into a typed
// format_error naming the record. The kernel never reads outside [data, data + bytes) nor writes
// outside the output rows, whatever the offsets say.
//
// Speed: memory-bound; it reads the bytes it keeps and writes every output byte once. E.g. 64 MiB
// of records averaging 1 KiB, padded to 2 KiB rows, moves ~64 + 128 MiB of device memory
// (bench/transforms_bench measures it).
#pragma once

#include <cub/device/device_reduce.cuh>
#include <cuda_runtime_api.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

#include "gpufeed/cuda/check.hpp"
#include "gpufeed/cuda/detail/pad_kernels.cuh"
#include "gpufeed/cuda/device_buffer.hpp"
#include "gpufeed/cuda/transform.hpp"
#include "gpufeed/error.hpp"

namespace gpufeed::cuda {

// The pad element: its size (1, 2, 4 or 8 bytes) and its bytes, little-endian in the low `bytes`
// bytes of `bits` (the bytes above must be 0). make_pad_element builds one from a value.
struct pad_element {
  std::size_t bytes = 1;
  std::uint64_t bits = 0;
};

template <class T>
  requires std::is_trivially_copyable_v<T> &&
           (sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8)
[[nodiscard]] pad_element make_pad_element(const T& value) {
  static_assert(std::endian::native == std::endian::little, "the GPU is little-endian");
  pad_element e;
  e.bytes = sizeof(T);
  std::memcpy(&e.bits, &value, sizeof(T));
  return e;
}

// A packed batch in device memory (see the top of this file).
struct packed_batch {
  const std::byte* data = nullptr;
  std::size_t bytes = 0;
  const std::uint64_t* offsets = nullptr;  // records + 1 entries
  std::size_t records = 0;
};

// Where a pad call writes, in device memory.
struct padded_batch {
  std::byte* data = nullptr;          // records * max_len * element_bytes bytes, any alignment
  std::uint32_t* lengths = nullptr;   // records entries; may be null
  std::size_t max_len = 0;            // elements per row, 1 .. 2^32 - 1
};

// What a pad call found, written in device memory (unsigned long long so kernels can update it
// with atomics). A pad call resets it on its stream before padding.
struct pad_status {
  unsigned long long truncated = 0;            // records longer than max_len
  unsigned long long malformed = 0;            // see the top of this file
  unsigned long long first_malformed_inv = 0;  // ~(smallest malformed index); 0 when none
  [[nodiscard]] std::optional<std::uint64_t> first_malformed() const noexcept {
    if (first_malformed_inv == 0) return std::nullopt;
    return ~first_malformed_inv;
  }
};

// Throws format_error (record = the first malformed record, file = `file` if given) when the
// status reports malformed records. Truncation is not an error.
inline void check_pad_status(const pad_status& s, const std::string& file = {}) {
  if (s.malformed == 0) return;
  error_context ctx;
  ctx.file = file;
  ctx.record = s.first_malformed();
  throw format_error(std::to_string(s.malformed) +
                         " malformed record(s) in a padded batch: offsets that decrease or point "
                         "past the batch's bytes, or a byte count that is not a multiple of the "
                         "element size (the first is the record named here, counted from the "
                         "batch's first record)",
                     std::move(ctx));
}

// Copies a device pad_status to the host. Synchronises `stream`: for tests, diagnostics and the
// end of an epoch, not for the pipeline's steady state.
[[nodiscard]] inline pad_status read_pad_status(const pad_status* device_status,
                                                cudaStream_t stream) {
  pad_status s;
  GPUFEED_CUDA_TRY(cudaMemcpyAsync(&s, device_status, sizeof s, cudaMemcpyDeviceToHost, stream));
  GPUFEED_CUDA_TRY(cudaStreamSynchronize(stream));
  return s;
}

// Bytes of the padded rows for `records` rows of max_len elements; config_error on overflow.
[[nodiscard]] inline std::size_t padded_bytes(std::size_t records, std::size_t max_len,
                                              std::size_t element_bytes) {
  const std::size_t limit = std::numeric_limits<std::size_t>::max();
  if (max_len != 0 && element_bytes != 0 && records > limit / max_len / element_bytes)
    throw config_error("pad: " + std::to_string(records) + " rows of " + std::to_string(max_len) +
                       " elements overflow the address space");
  return records * max_len * element_bytes;
}

// Pads packed batches of up to max_records records, on the caller's stream.
//
// Owns, allocated once at construction: the CUB scratch for max_length() sized for max_records,
// and a device pad_status used when a call is given none. Calls queue work and return without
// synchronising the host or allocating. The scratch and the own status are per padder: calls on
// different streams must not overlap in time on one padder (use one padder per stream, or pass
// each call its own status and order the max_length() calls). Move-only.
class padder {
 public:
  // Throws config_error for max_records == 0, an element size other than 1, 2, 4 or 8, or pad
  // bits above the element size; cuda_error if the device memory cannot be allocated (this is
  // also what happens without a GPU).
  explicit padder(std::size_t max_records, pad_element element = {})
      : max_records_(max_records), element_(element) {
    if (max_records == 0) throw config_error("padder: max_records is 0");
    const std::size_t b = element.bytes;
    if (b != 1 && b != 2 && b != 4 && b != 8)
      throw config_error("padder: element size " + std::to_string(b) +
                         " bytes; it must be 1, 2, 4 or 8");
    if (b < 8 && (element.bits >> (8 * b)) != 0)
      throw config_error("padder: pad bits do not fit in a " + std::to_string(b) +
                         "-byte element");
    shift_ = static_cast<unsigned>(std::countr_zero(b));
    pad64_ = element.bits;
    for (std::size_t filled = b; filled < 8; filled *= 2) pad64_ |= pad64_ << (8 * filled);
    temp_bytes_ = max_temp_bytes(max_records);
    storage_ = device_buffer(temp_offset + temp_bytes_);
  }

  // A moved-from padder refuses calls (config_error). Move-assignment swaps, so the source then
  // holds this padder's old, coherent state until it is destroyed.
  padder(padder&&) noexcept = default;
  padder& operator=(padder&& o) noexcept {
    std::swap(storage_, o.storage_);
    std::swap(max_records_, o.max_records_);
    std::swap(temp_bytes_, o.temp_bytes_);
    std::swap(element_, o.element_);
    std::swap(shift_, o.shift_);
    std::swap(pad64_, o.pad64_);
    return *this;
  }

  // Queues the padding of `in` into `out` on `stream`, after resetting `status` (the padder's own
  // when null) on it. records == 0 only resets the status. Throws config_error, before queuing
  // anything, for more than max_records records, a null offsets/output pointer (or null data
  // with bytes > 0), max_len 0 or above 2^32 - 1, or an output size that overflows.
  void operator()(const packed_batch& in, const padded_batch& out, cudaStream_t stream,
                  pad_status* status = nullptr) const {
    check_batch(in, "pad");
    if (in.records != 0) {
      if (out.data == nullptr) throw config_error("pad: null output pointer");
      if (out.max_len == 0 || out.max_len > std::numeric_limits<std::uint32_t>::max())
        throw config_error("pad: max_len " + std::to_string(out.max_len) +
                           " is outside 1 .. 2^32 - 1");
      (void)padded_bytes(in.records, out.max_len, element_.bytes);
    }
    if (status == nullptr) status = own_status();
    GPUFEED_CUDA_TRY(cudaMemsetAsync(status, 0, sizeof(pad_status), stream));
    if (in.records == 0) return;
    detail::pad_args a;
    a.data = reinterpret_cast<const unsigned char*>(in.data);
    a.data_bytes = in.bytes;
    a.offsets = in.offsets;
    a.records = in.records;
    a.out = reinterpret_cast<unsigned char*>(out.data);
    a.lengths = out.lengths;
    a.max_len = out.max_len;
    a.row_bytes = static_cast<std::uint64_t>(out.max_len) << shift_;
    a.chunks_per_row =
        std::max<std::uint64_t>(1, detail::ceil_div(a.row_bytes / 4, detail::pad_chunk_words));
    a.pad64 = pad64_;
    a.truncated = &status->truncated;
    a.malformed = &status->malformed;
    a.first_malformed_inv = &status->first_malformed_inv;
    detail::launch_pad(a, shift_, stream);
  }

  // Queues cub::DeviceReduce::Max over the records' lengths in elements (untruncated; 0 for
  // records with bad offsets), writing the result to the device scalar *max_len_out (0 for an
  // empty batch). Throws config_error like operator() for a bad batch or a null max_len_out.
  void max_length(const packed_batch& in, std::uint64_t* max_len_out, cudaStream_t stream) const {
    check_batch(in, "max_length");
    if (max_len_out == nullptr) throw config_error("max_length: null output pointer");
    if (in.records == 0) {
      GPUFEED_CUDA_TRY(cudaMemsetAsync(max_len_out, 0, sizeof(std::uint64_t), stream));
      return;
    }
    const auto lengths = length_iterator(in);
    std::size_t need = 0;
    GPUFEED_CUDA_TRY(cub::DeviceReduce::Max(nullptr, need, lengths, max_len_out,
                                            static_cast<std::uint64_t>(in.records), stream));
    if (need > temp_bytes_)  // CUB's scratch grows with the item count, sized for max_records
      throw config_error("max_length: CUB needs " + std::to_string(need) +
                         " scratch bytes, more than the " + std::to_string(temp_bytes_) +
                         " sized at construction");
    std::size_t have = temp_bytes_;
    GPUFEED_CUDA_TRY(cub::DeviceReduce::Max(storage_.data() + temp_offset, have, lengths,
                                            max_len_out, static_cast<std::uint64_t>(in.records),
                                            stream));
  }

  // The padder's own device status (what a call given no status writes).
  [[nodiscard]] pad_status* own_status() const noexcept {
    return reinterpret_cast<pad_status*>(storage_.data());
  }
  [[nodiscard]] std::size_t max_records() const noexcept { return max_records_; }
  [[nodiscard]] const pad_element& element() const noexcept { return element_; }

 private:
  static constexpr std::size_t temp_offset = 256;  // own status first, CUB scratch aligned after

  using length_iterator_t =
      thrust::transform_iterator<detail::record_length_op, thrust::counting_iterator<std::uint64_t>>;

  length_iterator_t length_iterator(const packed_batch& in) const {
    detail::record_length_op op;
    op.offsets = in.offsets;
    op.data_bytes = in.bytes;
    op.shift = shift_;
    return length_iterator_t(thrust::counting_iterator<std::uint64_t>(0), op);
  }

  std::size_t max_temp_bytes(std::size_t records) const {
    std::size_t bytes = 0;
    GPUFEED_CUDA_TRY(cub::DeviceReduce::Max(nullptr, bytes, length_iterator(packed_batch{}),
                                            static_cast<std::uint64_t*>(nullptr),
                                            static_cast<std::uint64_t>(records)));
    return bytes;
  }

  void check_batch(const packed_batch& in, const char* what) const {
    if (storage_.data() == nullptr) throw config_error(std::string(what) + ": moved-from padder");
    if (in.records > max_records_)
      throw config_error(std::string(what) + ": " + std::to_string(in.records) +
                         " records, more than the padder's max_records " +
                         std::to_string(max_records_));
    if (in.records == 0) return;
    if (in.offsets == nullptr) throw config_error(std::string(what) + ": null offsets");
    if (in.data == nullptr && in.bytes != 0)
      throw config_error(std::string(what) + ": null data with " + std::to_string(in.bytes) +
                         " bytes");
  }

  device_buffer storage_;
  std::size_t max_records_ = 0;
  std::size_t temp_bytes_ = 0;
  pad_element element_;
  unsigned shift_ = 0;
  std::uint64_t pad64_ = 0;
};

// Bytes a pad_transform needs at batch.output: the padded rows, then (at the next 8-byte
// boundary) `records` uint32 lengths.
[[nodiscard]] inline std::size_t pad_transform_lengths_offset(std::size_t records,
                                                              std::size_t max_len,
                                                              std::size_t element_bytes) {
  return (padded_bytes(records, max_len, element_bytes) + 7) / 8 * 8;
}
[[nodiscard]] inline std::size_t pad_transform_output_bytes(std::size_t records,
                                                            std::size_t max_len,
                                                            std::size_t element_bytes) {
  return pad_transform_lengths_offset(records, max_len, element_bytes) +
         records * sizeof(std::uint32_t);
}

// A padder as a loader transform: pads the batch's variable-size records (batch.offsets) into
// batch.output laid out as above, writing the status to `status` (the padder's own when null). Holds a pointer to the padder, which must outlive it. Throws
// unsupported_error for a batch without offsets and config_error for a too small output.
class pad_transform {
 public:
  pad_transform(const padder& p, std::size_t max_len, pad_status* status = nullptr)
      : padder_(&p), max_len_(max_len), status_(status) {}
  pad_transform(padder&&, std::size_t, pad_status* = nullptr) = delete;  // would dangle

  void operator()(const device_batch_view& batch, cudaStream_t stream) const {
    if (batch.offsets == nullptr)
      throw unsupported_error("pad_transform: the batch has no offsets (fixed-size records)");
    const std::size_t eb = padder_->element().bytes;
    const std::size_t need = pad_transform_output_bytes(batch.records, max_len_, eb);
    if (batch.output == nullptr || batch.output_bytes < need)
      throw config_error("pad_transform: output has " + std::to_string(batch.output_bytes) +
                         " bytes; " + std::to_string(need) + " needed");
    packed_batch in;
    in.data = batch.data;
    in.bytes = batch.data_bytes;
    in.offsets = batch.offsets;
    in.records = batch.records;
    padded_batch out;
    out.data = batch.output;
    out.lengths = reinterpret_cast<std::uint32_t*>(
        batch.output + pad_transform_lengths_offset(batch.records, max_len_, eb));
    out.max_len = max_len_;
    (*padder_)(in, out, stream, status_);
  }

 private:
  const padder* padder_;
  std::size_t max_len_;
  pad_status* status_;
};

static_assert(device_transform<pad_transform>);

}  // namespace gpufeed::cuda
