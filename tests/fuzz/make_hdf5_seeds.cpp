// Writes the seed corpus of fuzz_hdf5_open into the directory given (kept in
// tests/fuzz/seeds/hdf5_open; rerun after changing it: build target make_hdf5_seeds).
#include <cstdint>
#include <filesystem>
#include <vector>

#include "h5_writer.hpp"

using gpufeed::test::dataset_spec;
using gpufeed::test::h5_file;
using gpufeed::test::pattern;

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  const std::filesystem::path dir = argv[1];
  std::filesystem::create_directories(dir);
  const auto v = pattern<std::int16_t>(12 * 4, 3);
  {
    h5_file f(dir / "contiguous.h5");
    dataset_spec s;
    s.file_type = H5T_STD_I16LE;
    s.mem_type = H5T_NATIVE_INT16;
    s.dims = {12, 4};
    f.add(s, v);
  }
  for (bool latest : {false, true}) {
    h5_file f(dir / (latest ? "chunked_latest.h5" : "chunked_filters.h5"), latest);
    dataset_spec s;
    s.file_type = H5T_STD_I16BE;
    s.mem_type = H5T_NATIVE_INT16;
    s.dims = {12, 4};
    s.chunk = {5, 4};
    s.shuffle = s.fletcher32 = true;
    s.deflate = 1;
    s.unlimited = latest;
    f.add(s, v);
  }
  {
    h5_file f(dir / "chunked_raw_latest.h5", true);
    dataset_spec s;
    s.dims = {12, 4};
    s.chunk = {4, 4};
    f.add(s, pattern<std::uint8_t>(48, 4));
  }
  {
    h5_file f(dir / "blob_labels.h5");
    dataset_spec d;
    d.dims = {40};
    d.chunk = {16};
    f.add(d, pattern<std::uint8_t>(40, 5));
    f.add_offsets({0, 3, 3, 17, 40});
    dataset_spec l;
    l.name = "labels";
    l.file_type = H5T_STD_I32LE;
    l.mem_type = H5T_NATIVE_INT32;
    l.dims = {4};
    f.add(l, std::vector<std::int32_t>{1, -2, 3, 4});
  }
  {
    h5_file f(dir / "compact.h5");
    dataset_spec s;
    s.file_type = H5T_STD_I16LE;
    s.mem_type = H5T_NATIVE_INT16;
    s.dims = {12, 4};
    s.compact = true;
    f.add(s, v);
  }
  return 0;
}
