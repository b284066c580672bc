// dlpack_export: batches handed to a framework as DLPack tensors, without a copy.
//
//   dlpack_export SHARDS [--epochs 1]
//
// SHARDS: a directory of HDF5 shards made by `gpufeed pack` (or one .h5 file). Each batch is
// exported with gpufeed::to_dlpack and given to take_tensor(), which stands in for a framework's
// from_dlpack (libtorch: at::fromDLPack(t); CuPy/JAX take the same struct in a "dltensor"
// capsule): it reads only the DLTensor, and calls the deleter when done, which is what returns
// the batch to the loader. On the host target it also sums the bytes it was given.
#include <dlpack/dlpack.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "gpufeed/dlpack.hpp"
#include "gpufeed/hdf5_source.hpp"
#include "gpufeed/loader.hpp"
#include "gpufeed/target_choice.hpp"

namespace {

const char* dtype_name(DLDataType t) {
  switch (t.code) {
    case kDLInt: return "int";
    case kDLUInt: return "uint";
    case kDLFloat: return "float";
    default: return "other";
  }
}

// A framework's side: it sees only the DLPack struct. Returns the tensor's byte count.
std::uint64_t take_tensor(DLManagedTensor* m, bool describe, std::uint64_t& sum) {
  const DLTensor& t = m->dl_tensor;
  std::uint64_t elements = 1;
  std::string shape;
  for (std::int32_t d = 0; d < t.ndim; ++d) {
    elements *= static_cast<std::uint64_t>(t.shape[d]);
    shape += (d ? ", " : "") + std::to_string(t.shape[d]);
  }
  const std::uint64_t bytes = elements * t.dtype.bits / 8 * t.dtype.lanes;
  if (describe)
    std::printf("  tensor (%s) %s%u on %s:%d\n", shape.c_str(), dtype_name(t.dtype),
                static_cast<unsigned>(t.dtype.bits), t.device.device_type == kDLCUDA ? "cuda" : "cpu",
                static_cast<int>(t.device.device_id));
  if (t.device.device_type == kDLCPU) {
    const auto* p = static_cast<const unsigned char*>(t.data) + t.byte_offset;
    for (std::uint64_t k = 0; k < bytes; ++k) sum += p[k];
  }
  m->deleter(m);  // the framework is done: the batch goes back to the loader
  return bytes;
}

std::vector<std::filesystem::path> shards_at(const std::filesystem::path& p) {
  if (!std::filesystem::is_directory(p)) return {p};
  std::vector<std::filesystem::path> out;
  for (const auto& e : std::filesystem::directory_iterator(p))
    if (e.path().extension() == ".h5") out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: dlpack_export SHARDS [--epochs N]\n");
    return 2;
  }
  const std::uint64_t epochs = argc >= 4 && std::string(argv[2]) == "--epochs" ? std::strtoull(argv[3], nullptr, 10) : 1;
  try {
    gpufeed::hdf5_source src(shards_at(argv[1]));
    const gpufeed::dlpack_layout layout = gpufeed::dlpack_layout_of(src);
    gpufeed::loader_config cfg;
    cfg.batch_size = 64;
    cfg.epochs = epochs;
    cfg.part = gpufeed::partition{};
    std::string why;
    cfg.target = gpufeed::device_or_host(0, &why);
    gpufeed::loader<gpufeed::hdf5_source> feed(src, cfg);
    std::printf("dlpack_export: %llu records to %s%s\n", static_cast<unsigned long long>(src.size()),
                cfg.target.name().c_str(), why.empty() ? "" : (" (" + why + ")").c_str());
    std::uint64_t batches = 0, bytes = 0, records = 0, sum = 0;
    while (auto b = feed.next()) {
      records += b->size();
      const gpufeed::dlpack_tensors t = gpufeed::to_dlpack(std::move(*b), layout);
      bytes += take_tensor(t.data, batches == 0, sum);
      if (t.labels) take_tensor(t.labels, batches == 0, sum);
      ++batches;
    }
    std::printf("dlpack_export: %llu batches, %llu records, %llu data bytes (byte sum %llu)\n",
                static_cast<unsigned long long>(batches), static_cast<unsigned long long>(records),
                static_cast<unsigned long long>(bytes), static_cast<unsigned long long>(sum));
    return records == src.size() * epochs ? 0 : 1;
  } catch (const gpufeed::error& e) {
    std::fprintf(stderr, "dlpack_export: %s\n", e.describe().c_str());
    return 1;
  }
}
