// hdf5_read_bench's files: created once with the benchmark's records, reused while their shape
// and layout match, read once into the page cache before timing.
#pragma once

#include <fcntl.h>
#include <hdf5.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "gpufeed/hdf5_source.hpp"

namespace h5files {

constexpr std::size_t record_bytes = 16384;

inline void die(const std::string& m) { throw std::runtime_error(m); }

// Creates `path` with N records unless a file with that shape and layout is already there.
inline void ensure_file(const std::filesystem::path& path, hsize_t n, hsize_t rows_per_chunk) {
  const bool chunked = rows_per_chunk > 0;
  if (std::filesystem::exists(path)) {
    try {
      gpufeed::hdf5_source s(path);
      const auto& i = s.shards()[0];
      if (i.shape == std::vector<std::uint64_t>{n, record_bytes} &&
          i.storage == (chunked ? "chunked" : "contiguous") &&
          (!chunked || i.chunk_shape == std::vector<std::uint64_t>{rows_per_chunk, record_bytes}))
        return;
    } catch (const std::exception&) {
    }
  }
  std::fprintf(stderr, "creating %s (%llu records)...\n", path.c_str(),
               static_cast<unsigned long long>(n));
  const hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  const hsize_t dims[2] = {n, record_bytes};
  const hid_t space = H5Screate_simple(2, dims, nullptr);
  const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  if (chunked) {
    const hsize_t chunk[2] = {rows_per_chunk, record_bytes};
    H5Pset_chunk(dcpl, 2, chunk);
    H5Pset_deflate(dcpl, 1);
  }
  const hid_t d = H5Dcreate2(f, "data", H5T_STD_U8LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  if (f < 0 || d < 0) die("cannot create " + path.string());
  const hsize_t step = 256;  // rows per write: a multiple of rows_per_chunk when it is 16
  std::vector<std::uint8_t> buf(step * record_bytes);
  std::mt19937 rng(7);
  for (hsize_t r = 0; r < n; r += step) {
    const hsize_t rows = std::min(step, n - r);
    // Compressible about 1.9:1 at level 1, like smooth image data: gradients plus 2 noise bits.
    for (std::size_t k = 0; k < rows * record_bytes; ++k)
      buf[k] = static_cast<std::uint8_t>((k % 128) / 2 + (r + k / record_bytes) * 3 + (rng() & 3));
    const hsize_t start[2] = {r, 0}, count[2] = {rows, record_bytes};
    const hid_t fs = H5Dget_space(d);
    H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, nullptr, count, nullptr);
    const hid_t ms = H5Screate_simple(2, count, nullptr);
    if (H5Dwrite(d, H5T_NATIVE_UINT8, ms, fs, H5P_DEFAULT, buf.data()) < 0) die("H5Dwrite failed");
    H5Sclose(ms);
    H5Sclose(fs);
  }
  H5Dclose(d);
  H5Pclose(dcpl);
  H5Sclose(space);
  H5Fclose(f);
}

inline void warm_page_cache(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) die("cannot open " + path.string());
  std::vector<char> buf(std::size_t{8} << 20);
  while (::read(fd, buf.data(), buf.size()) > 0) {
  }
  ::close(fd);
}

}  // namespace h5files
