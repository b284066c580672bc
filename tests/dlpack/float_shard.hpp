// The DLPack tests' shard: one HDF5 file, data float32 (40, 3, 4) holding value_of(i, k) at
// element k of row i, labels int32 label_of(i).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <vector>

#include "h5_writer.hpp"
#include "test_util.hpp"

namespace gpufeed::test {

inline constexpr std::uint64_t rows = 40;
inline float value_of(std::uint64_t record, std::size_t k) { return static_cast<float>(record) * 100.0f + static_cast<float>(k); }
inline std::int32_t label_of(std::uint64_t record) { return static_cast<std::int32_t>(record * 3) - 50; }

// One HDF5 shard: data float32 (40, 3, 4), value_of(i, k) at element k of row i; labels int32.
struct float_shard {
  gpufeed::test::temp_dir dir{"dlpack"};
  std::filesystem::path path = dir / "f.h5";
  float_shard() {
    std::vector<float> data;
    std::vector<std::int32_t> labels;
    for (std::uint64_t i = 0; i < rows; ++i) {
      for (std::size_t k = 0; k < 12; ++k) data.push_back(value_of(i, k));
      labels.push_back(label_of(i));
    }
    h5_file f(path);
    dataset_spec d;
    d.file_type = H5T_IEEE_F32LE;
    d.mem_type = H5T_NATIVE_FLOAT;
    d.dims = {rows, 3, 4};
    f.add(d, data);
    dataset_spec l;
    l.name = "labels";
    l.file_type = H5T_STD_I32LE;
    l.mem_type = H5T_NATIVE_INT32;
    l.dims = {rows};
    f.add(l, labels);
  }
};

}  // namespace gpufeed::test
