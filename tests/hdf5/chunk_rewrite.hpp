// Rewrites one stored chunk of an HDF5 file in place (H5Dwrite_chunk), for damage tests.
#pragma once

#include <doctest/doctest.h>

#include <hdf5.h>

#include <cstdint>
#include <filesystem>
#include <vector>

#include "h5_writer.hpp"

namespace gpufeed::test {

// Replaces the stored bytes of the first chunk of "data" that every filter was applied to (an
// optional filter skips a chunk it cannot shrink) with edit(bytes), keeping its filter mask.
// Returns the first record (row) that chunk holds.
template <class Edit>
std::uint64_t rewrite_filtered_chunk(const std::filesystem::path& path, Edit edit) {
  h5_id f(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT), H5Fclose, "H5Fopen");
  h5_id d(H5Dopen2(f, "data", H5P_DEFAULT), H5Dclose, "H5Dopen2");
  h5_id space(H5Dget_space(d), H5Sclose, "H5Dget_space");
  hsize_t chunks = 0;
  h5_check(H5Dget_num_chunks(d, space, &chunks), "H5Dget_num_chunks");
  for (hsize_t k = 0; k < chunks; ++k) {
    hsize_t origin[2] = {0, 0}, stored = 0;
    unsigned mask = 0;
    haddr_t addr = 0;
    h5_check(H5Dget_chunk_info(d, space, k, origin, &mask, &addr, &stored), "H5Dget_chunk_info");
    if (mask != 0) continue;
    std::vector<unsigned char> bytes(stored);
    std::uint32_t read_mask = 0;
    h5_check(H5Dread_chunk(d, H5P_DEFAULT, origin, &read_mask, bytes.data()), "H5Dread_chunk");
    edit(bytes);
    h5_check(H5Dwrite_chunk(d, H5P_DEFAULT, mask, origin, bytes.size(), bytes.data()),
             "H5Dwrite_chunk");
    return origin[0];
  }
  FAIL("no chunk of " << path << " went through every filter");
  return 0;
}

}  // namespace gpufeed::test
