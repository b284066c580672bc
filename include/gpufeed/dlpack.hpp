// gpufeed — batches as DLPack tensors, so libtorch, CuPy, JAX (and anything else that reads
// DLPack) wrap a batch's memory without a copy.
//
//   auto layout = gpufeed::dlpack_layout_of(shards);         // once, from the source
//   gpufeed::dlpack_tensors t = gpufeed::to_dlpack(std::move(*b), layout);
//   at::Tensor x = at::fromDLPack(t.data);                    // (records, ...row shape), dtype
//   at::Tensor y = at::fromDLPack(t.labels);                  // (records,) int64
//
// Shape and dtype: for records of one fixed size, a row-major (records, ...record shape) tensor
// of the source's element type (hdf5_source: its dataset's dtype and row shape; other sources
// of fixed-size records: (records, record bytes) uint8); for records that vary, a 1-D uint8
// tensor of the batch's data bytes (offsets() tells where each record starts). Labels are their
// own (records,) int64 tensor. Strides are given explicitly, in elements. Device: kDLCUDA with
// the batch's device on a device target, kDLCPU on the host target.
//
// Lifetime: to_dlpack takes the batch. It stays held — its slot is not refilled, and it counts
// against loader_config::max_held_batches — until the deleter of every tensor made from it has
// run (in libtorch: until the last at::Tensor sharing that memory is gone); the last deleter
// releases it, on whatever thread it runs. The returned tensors are owned by the caller: pass
// each to a consumer, or call its deleter. The loader must outlive them (as it must outlive any
// batch). Labels are read-only (the versioned tensor says so in its flags).
//
// Streams (device targets): the batch is ordered before the loader's consumer stream, and its
// release waits for work queued there. Give the loader the framework's stream
// (loader_config::consumer_stream, e.g. at::cuda::getCurrentCUDAStream()) so the framework's
// kernels both see the copied data and finish before the slot is reused.
//
// DLPack versions: DLManagedTensor (the legacy struct every DLPack version has: what
// at::fromDLPack, torch.utils.dlpack and CuPy's fromDlpack take) always; DLManagedTensorVersioned
// (to_dlpack_versioned) when <dlpack/dlpack.h> is DLPack 1.0 or later (Debian 12's
// libdlpack-dev is 0.6 and has only the legacy struct).
#pragma once

#include <dlpack/dlpack.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gpufeed/batch.hpp"
#include "gpufeed/detail/dlpack.hpp"
#include "gpufeed/error.hpp"
#include "gpufeed/source.hpp"

namespace gpufeed {

// What one record is, as a tensor.
struct dlpack_layout {
  bool fixed = false;                      // records of one size: (records, ...record_shape)
  DLDataType dtype{kDLUInt, 8, 1};         // element type (fixed only; varying records: uint8)
  std::vector<std::int64_t> record_shape;  // one record's shape; empty: one element per record
};

// The layout of a source's records: an hdf5_source's dataset dtype and row shape (any source
// whose shards() report `layout`, `dtype` and `shape` the way hdf5_shard_info does), else
// (record bytes) uint8 for sources of fixed-size records, else varying records.
// unsupported_error for an element type DLPack is not given here.
template <source S>
dlpack_layout dlpack_layout_of(const S& s) {
  dlpack_layout l;
  const std::size_t fixed = fixed_record_size(s);
  if (fixed == 0) return l;
  l.fixed = true;
  if constexpr (requires { s.shards().front().dtype; s.shards().front().shape; s.shards().front().layout; }) {
    if (!s.shards().empty() && s.shards().front().layout == "fixed") {
      const auto& first = s.shards().front();
      if (!detail::dlpack::parse_dtype(first.dtype, l.dtype))
        throw unsupported_error("DLPack export: element type '" + first.dtype + "' is not one gpufeed maps",
                                file_context(first.path.string()));
      for (std::size_t d = 1; d < first.shape.size(); ++d)
        l.record_shape.push_back(static_cast<std::int64_t>(first.shape[d]));
      return l;
    }
  }
  l.record_shape = {static_cast<std::int64_t>(fixed)};
  return l;
}

// The tensors made from one batch; null members were not made. Owned by the caller.
struct dlpack_tensors {
  DLManagedTensor* data = nullptr;
  DLManagedTensor* labels = nullptr;  // null when the batch has no labels
};

namespace detail::dlpack {

inline DLDevice device_of(const batch& b) {
  return b.on_device() ? DLDevice{kDLCUDA, b.device()} : DLDevice{kDLCPU, 0};
}

// The data tensor's shape; config_error when the layout does not fit the batch.
inline std::vector<std::int64_t> data_shape(const batch& b, const dlpack_layout& l) {
  const auto records = static_cast<std::int64_t>(b.size());
  if (!l.fixed) return {static_cast<std::int64_t>(b.data().size())};
  std::int64_t elements = 1;
  for (const std::int64_t d : l.record_shape) elements *= d;
  const std::size_t bytes = static_cast<std::size_t>(elements) * (l.dtype.bits / 8u) * l.dtype.lanes;
  if (b.record_bytes() != bytes)
    throw config_error("DLPack export: the layout says records of " + std::to_string(bytes) +
                       " bytes, the batch's are " +
                       (b.record_bytes() ? std::to_string(b.record_bytes()) + " bytes" : std::string("of varying size")) +
                       " (make the layout with dlpack_layout_of(source) of the loader's source)");
  std::vector<std::int64_t> shape{records};
  shape.insert(shape.end(), l.record_shape.begin(), l.record_shape.end());
  return shape;
}

template <class Managed, class Out>
Out export_batch(batch&& b, const dlpack_layout& l) {
  if (!b.valid()) throw config_error("DLPack export: the batch was already released");
  std::vector<std::int64_t> shape = data_shape(b, l);
  const DLDataType dtype = l.fixed ? l.dtype : DLDataType{kDLUInt, 8, 1};
  auto held = std::make_shared<batch>(std::move(b));
  const DLDevice device = device_of(*held);
  Out out;
  std::unique_ptr<Managed, void (*)(Managed*)> data(
      make_tensor<Managed>(held, held->data().data(), device, dtype, std::move(shape)),
      [](Managed* m) { m->deleter(m); });
  if (held->has_labels()) {
    const auto labels = held->labels();
    out.labels = make_tensor<Managed>(held, const_cast<std::int64_t*>(labels.data()), device,
                                      DLDataType{kDLInt, 64, 1}, {static_cast<std::int64_t>(labels.size())});
  }
  out.data = data.release();
  return out;
}

}  // namespace detail::dlpack

// Exports batch b (taken; see Lifetime above) as DLPack tensors of `layout`. config_error when b
// was released or the layout's record size is not the batch's.
inline dlpack_tensors to_dlpack(batch&& b, const dlpack_layout& layout) {
  return detail::dlpack::export_batch<DLManagedTensor, dlpack_tensors>(std::move(b), layout);
}

#if defined(DLPACK_MAJOR_VERSION) && DLPACK_MAJOR_VERSION >= 1
struct dlpack_versioned_tensors {
  DLManagedTensorVersioned* data = nullptr;
  DLManagedTensorVersioned* labels = nullptr;
};

// As to_dlpack, as DLManagedTensorVersioned (DLPack >= 1.0 headers); labels are flagged
// read-only.
inline dlpack_versioned_tensors to_dlpack_versioned(batch&& b, const dlpack_layout& layout) {
  auto t = detail::dlpack::export_batch<DLManagedTensorVersioned, dlpack_versioned_tensors>(std::move(b), layout);
  for (DLManagedTensorVersioned* m : {t.data, t.labels})
    if (m) m->version = DLPackVersion{DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
  if (t.labels) t.labels->flags = DLPACK_FLAG_BITMASK_READ_ONLY;
  return t;
}
#endif

}  // namespace gpufeed
