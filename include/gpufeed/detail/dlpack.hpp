// gpufeed — the DLPack export's implementation: dtype names to DLDataType, the tensor a batch
// view becomes, and the manager context that keeps the batch held until the last deleter runs.
#pragma once

#include <dlpack/dlpack.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gpufeed/batch.hpp"
#include "gpufeed/error.hpp"

namespace gpufeed::detail::dlpack {

// "uint8", "int16", "float32", ... as the HDF5 source names them (a " big-endian" or
// " little-endian" suffix describes the file; records are delivered in native order). false for
// a name it does not know.
inline bool parse_dtype(std::string_view name, DLDataType& out) {
  if (const auto space = name.find(' '); space != std::string_view::npos) name = name.substr(0, space);
  struct known {
    std::string_view name;
    std::uint8_t code, bits;
  };
  static constexpr known table[] = {
      {"uint8", kDLUInt, 8},   {"uint16", kDLUInt, 16},  {"uint32", kDLUInt, 32},
      {"uint64", kDLUInt, 64}, {"int8", kDLInt, 8},      {"int16", kDLInt, 16},
      {"int32", kDLInt, 32},   {"int64", kDLInt, 64},    {"float16", kDLFloat, 16},
      {"float32", kDLFloat, 32}, {"float64", kDLFloat, 64},
  };
  for (const auto& k : table)
    if (k.name == name) {
      out = DLDataType{k.code, k.bits, 1};
      return true;
    }
  return false;
}

// One exported tensor: its shape and strides arrays, and its share of the batch. Deleting it
// drops the share; the batch is released (its slot goes back to the loader) with the last one.
template <class Managed>
struct holder {
  std::shared_ptr<batch> held;
  std::vector<std::int64_t> shape, strides;
  Managed managed{};

  static void destroy(Managed* self) noexcept { delete static_cast<holder*>(self->manager_ctx); }
};

// Fills t for a row-major tensor of `shape` at `data`, strides in elements.
template <class Managed>
void describe(holder<Managed>& h, void* data, DLDevice device, DLDataType dtype,
              std::vector<std::int64_t> shape) {
  h.shape = std::move(shape);
  h.strides.assign(h.shape.size(), 1);
  for (std::size_t d = h.shape.size(); d-- > 1;) h.strides[d - 1] = h.strides[d] * h.shape[d];
  DLTensor& t = h.managed.dl_tensor;
  t.data = data;
  t.device = device;
  t.ndim = static_cast<std::int32_t>(h.shape.size());
  t.dtype = dtype;
  t.shape = h.shape.data();
  t.strides = h.strides.data();
  t.byte_offset = 0;
  h.managed.manager_ctx = &h;
  h.managed.deleter = &holder<Managed>::destroy;
}

template <class Managed>
Managed* make_tensor(const std::shared_ptr<batch>& held, void* data, DLDevice device,
                     DLDataType dtype, std::vector<std::int64_t> shape) {
  auto h = std::make_unique<holder<Managed>>();
  h->held = held;
  describe(*h, data, device, dtype, std::move(shape));
  return &h.release()->managed;
}

}  // namespace gpufeed::detail::dlpack
