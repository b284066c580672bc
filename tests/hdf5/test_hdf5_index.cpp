// The chunk index gpufeed builds (index_driver capture of H5Dread_chunk) must equal what
// H5Dget_chunk_info_by_coord reports, for every chunk index type HDF5 1.10 writes, and chunks
// whose optional deflate HDF5 skipped (filter mask) must read back exactly.
#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "gpufeed/detail/hdf5/open_shard.hpp"
#include "gpufeed/hdf5_source.hpp"
#include "h5_writer.hpp"
#include "hdf5_test_util.hpp"
#include "test_util.hpp"

using namespace gpufeed;
using gpufeed::test::dataset_spec;
using gpufeed::test::h5_file;
using gpufeed::test::h5_id;
using gpufeed::test::pattern;
using gpufeed::test::rows_of;

namespace {

H5D_chunk_index_t index_type(const std::filesystem::path& path) {
  h5_id f(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose, "H5Fopen");
  h5_id d(H5Dopen2(f, "data", H5P_DEFAULT), H5Dclose, "H5Dopen2");
  H5D_chunk_index_t t = H5D_CHUNK_IDX_NTYPES;
  gpufeed::test::h5_check(H5Dget_chunk_index_type(d, &t), "H5Dget_chunk_index_type");
  return t;
}

// Compares every indexed chunk with H5Dget_chunk_info_by_coord; returns the mismatches.
int compare_index(const std::filesystem::path& path) {
  gpufeed::hdf5_options req;
  const auto s = detail::hdf5::open_shard(path, req);
  REQUIRE(s.kind == detail::hdf5::read_kind::chunked);
  h5_id f(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose, "H5Fopen");
  h5_id d(H5Dopen2(f, "data", H5P_DEFAULT), H5Dclose, "H5Dopen2");
  int bad = 0;
  detail::hdf5::coords pos{};
  for (std::uint64_t k = 0; k < s.grid.chunk_count; ++k) {
    std::vector<hsize_t> offset(static_cast<std::size_t>(s.rank));
    for (int d2 = 0; d2 < s.rank; ++d2) offset[d2] = pos[d2] * s.grid.chunk[d2];
    unsigned mask = 0;
    haddr_t addr = 0;
    hsize_t size = 0;
    gpufeed::test::h5_check(H5Dget_chunk_info_by_coord(d, offset.data(), &mask, &addr, &size),
                            "H5Dget_chunk_info_by_coord");
    const auto& c = s.chunks[static_cast<std::size_t>(k)];
    if (c.address != addr || c.size != size || c.filter_mask != mask) ++bad;
    CHECK(k == s.grid.linear(pos));
    for (int d2 = s.rank - 1; d2 >= 0; --d2) {
      if (++pos[d2] < s.grid.grid[d2]) break;
      pos[d2] = 0;
    }
  }
  return bad;
}

}  // namespace

TEST_CASE("chunk extents match H5Dget_chunk_info_by_coord for every index type") {
  gpufeed::test::temp_dir dir("h5ix");
  struct kind {
    const char* name;
    bool latest;
    bool unlimited;
    int unlimited_dims;
    bool early;
    int deflate;
    std::vector<hsize_t> chunk;
    H5D_chunk_index_t expect;
  };
  const auto v = pattern<std::uint16_t>(45 * 7 * 3, 8);
  for (const kind& k : {
           kind{"v1 B-tree", false, false, -1, false, 3, {4, 3, 3}, H5D_CHUNK_IDX_BTREE},
           kind{"v1 B-tree, unfiltered",
                false,
                false,
                -1,
                false,
                -1,
                {5, 7, 2},
                H5D_CHUNK_IDX_BTREE},
           kind{"fixed array", true, false, -1, false, 3, {4, 3, 3}, H5D_CHUNK_IDX_FARRAY},
           kind{"extensible array", true, true, 1, false, 3, {4, 7, 3}, H5D_CHUNK_IDX_EARRAY},
           kind{"v2 B-tree", true, true, -1, false, 3, {6, 2, 3}, H5D_CHUNK_IDX_BT2},
           kind{"single chunk", true, false, -1, false, 3, {45, 7, 3}, H5D_CHUNK_IDX_SINGLE},
           kind{"implicit", true, false, -1, true, -1, {4, 3, 3}, H5D_CHUNK_IDX_NONE},
       }) {
    CAPTURE(k.name);
    const auto path = dir / "ix.h5";
    {
      h5_file f(path, k.latest);
      dataset_spec s;
      s.file_type = H5T_STD_U16LE;
      s.mem_type = H5T_NATIVE_UINT16;
      s.dims = {45, 7, 3};
      s.chunk = k.chunk;
      s.unlimited = k.unlimited;
      s.unlimited_dims = k.unlimited_dims;
      s.early_alloc = k.early;
      s.deflate = k.deflate;
      f.add(s, v);
    }
    CHECK(index_type(path) == k.expect);
    CHECK(compare_index(path) == 0);
    hdf5_source src(path);
    CHECK_FALSE(src.uses_fallback());
    CHECK(gpufeed::test::count_mismatches(src, rows_of(v, 21)) == 0);
  }
}

TEST_CASE("chunks stored with some filters skipped (filter mask) read back exactly") {
  gpufeed::test::temp_dir dir("h5mask");
  // Pipeline shuffle, deflate, fletcher32. The chunk at row 8 is rewritten with H5Dwrite_chunk
  // with deflate skipped (mask 0b010), the chunk at row 12 with shuffle and deflate skipped
  // (0b011): the pattern HDF5 leaves when an optional filter fails. HDF5's own H5Dread checks
  // the hand-made chunks first.
  const auto v = pattern<std::uint32_t>(16 * 256, 9);
  const auto path = dir / "mask.h5";
  {
    h5_file f(path);
    dataset_spec s;
    s.file_type = H5T_STD_U32LE;
    s.mem_type = H5T_NATIVE_UINT32;
    s.dims = {16, 256};
    s.chunk = {4, 256};
    s.shuffle = s.fletcher32 = true;
    s.deflate = 9;
    f.add(s, v);
  }
  auto with_checksum = [](std::vector<std::byte> b) {
    const std::uint32_t sum = detail::hdf5::fletcher32(b.data(), b.size());
    for (int k = 0; k < 4; ++k) b.push_back(static_cast<std::byte>(sum >> (8 * k)));
    return b;
  };
  const std::size_t chunk_elems = 4 * 256;
  {
    h5_id f(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT), H5Fclose, "H5Fopen");
    h5_id d(H5Dopen2(f, "data", H5P_DEFAULT), H5Dclose, "H5Dopen2");
    for (hsize_t row : {8, 12}) {
      const auto* raw = reinterpret_cast<const std::byte*>(v.data() + row * 256);
      std::vector<std::byte> stored(raw, raw + chunk_elems * 4);
      if (row == 8) {  // byte planes, as HDF5's shuffle writes them
        for (std::size_t b = 0; b < 4; ++b)
          for (std::size_t i = 0; i < chunk_elems; ++i)
            stored[b * chunk_elems + i] = raw[i * 4 + b];
      }
      stored = with_checksum(std::move(stored));
      const hsize_t offset[2] = {row, 0};
      const std::uint32_t mask = row == 8 ? 0x2u : 0x3u;
      gpufeed::test::h5_check(
          H5Dwrite_chunk(d, H5P_DEFAULT, mask, offset, stored.size(), stored.data()),
          "H5Dwrite_chunk");
    }
  }
  {
    h5_id f(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose, "H5Fopen");
    h5_id d(H5Dopen2(f, "data", H5P_DEFAULT), H5Dclose, "H5Dopen2");
    std::vector<std::uint32_t> back(v.size());
    gpufeed::test::h5_check(
        H5Dread(d, H5T_NATIVE_UINT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, back.data()), "H5Dread");
    REQUIRE(back == v);
    const hsize_t offset[2] = {8, 0};
    unsigned mask = 0;
    haddr_t addr = 0;
    hsize_t size = 0;
    H5Dget_chunk_info_by_coord(d, offset, &mask, &addr, &size);
    CHECK(mask == 2);
  }
  CHECK(compare_index(path) == 0);
  hdf5_source src(path);
  CHECK(gpufeed::test::count_mismatches(src, rows_of(v, 256)) == 0);
}
