// The GPU path of gzip + shuffle (+ fletcher32) on chunks HDF5 itself wrote: the pipeline as
// gpufeed's chunk index reads it (read_pipeline), each chunk's stored bytes and filter mask from
// H5Dread_chunk, planned and decoded on the host's emulated warp, equal to H5Dread's values and
// to the CPU path's decode of the same bytes; a damaged chunk fails in the CPU path's words.
#include <doctest/doctest.h>

#include <hdf5.h>

#include <cstring>
#include <random>
#include <string>

#include "../hdf5/h5_writer.hpp"
#include "filter_data.hpp"
#include "gpufeed/detail/hdf5/chunk_index.hpp"
#include "test_util.hpp"

using namespace gpufeed_test;
namespace gt = gpufeed::test;

namespace {

struct combo {
  const char* name;
  bool fletcher32_first, shuffle, fletcher32;
};
// h5py 3's orders (the checksum applied last) and h5py 2's (applied first).
constexpr combo combos[] = {{"shuffle, deflate", false, true, false},
                            {"shuffle, deflate, fletcher32", false, true, true},
                            {"fletcher32, shuffle, deflate", true, true, false},
                            {"deflate, fletcher32", false, false, true},
                            {"fletcher32, deflate", true, false, false}};

}  // namespace

TEST_CASE("chunks HDF5 wrote with gzip + shuffle (+ fletcher32 either side) decode on the warp") {
  gt::temp_dir dir("gpu-filters");
  std::mt19937_64 rng(41);
  const hid_t types[] = {H5T_STD_U8LE, H5T_STD_U16LE, H5T_STD_U32LE, H5T_STD_U64LE};
  constexpr hsize_t rows = 2500, chunk_rows = 1000;  // two whole chunks and an edge chunk
  int chunks = 0, damaged = 0;
  for (int t = 0; t < 4; ++t) {
    const std::size_t e = std::size_t{1} << t;
    for (const combo& c : combos) {
      INFO(c.name << ", element size " << e);
      const auto path = dir / ("f" + std::to_string(chunks) + ".h5");
      const bytes data = make_bytes(chunks % 2 ? pattern::smooth_floats : pattern::runs,
                                    rows * e, rng);
      {
        gt::h5_file f(path);
        gt::dataset_spec s;
        s.file_type = s.mem_type = types[t];
        s.dims = {rows};
        s.chunk = {chunk_rows};
        s.fletcher32_first = c.fletcher32_first;
        s.shuffle = c.shuffle;
        s.deflate = 4;
        s.fletcher32 = c.fletcher32;
        f.add_raw(s, data.data());
      }
      gt::h5_id file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose, "H5Fopen");
      gt::h5_id dset(H5Dopen2(file, "data", H5P_DEFAULT), H5Dclose, "H5Dopen2");
      gt::h5_id dcpl(H5Dget_create_plist(dset), H5Pclose, "H5Dget_create_plist");
      gpufeed::detail::hdf5::shard_index index;
      index.element_size = e;
      REQUIRE(gpufeed::detail::hdf5::read_pipeline(index, dcpl, path.string()).empty());
      REQUIRE(index.pipeline.size() ==
              (c.shuffle ? 2u : 1u) + (c.fletcher32 || c.fletcher32_first ? 1u : 0u));
      bytes values(rows * e);
      REQUIRE(H5Dread(dset, types[t], H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()) >= 0);
      REQUIRE(values == data);
      for (hsize_t k = 0; k * chunk_rows < rows; ++k) {
        const hsize_t offset[1] = {k * chunk_rows};
        hsize_t stored_size = 0;
        REQUIRE(H5Dget_chunk_storage_size(dset, offset, &stored_size) >= 0);
        filtered_chunk chunk;
        chunk.pipeline = index.pipeline;
        chunk.stored.resize(stored_size);
        std::uint32_t mask = 0;
        REQUIRE(H5Dread_chunk(dset, H5P_DEFAULT, offset, &mask, chunk.stored.data()) >= 0);
        const std::size_t chunk_bytes = chunk_rows * e;
        bytes cpu, gpu;
        gpufeed::detail::hdf5::gpu_chunk_plan plan;
        REQUIRE(cpu_decode_chunk(chunk, mask, chunk_bytes, cpu).ok);
        const auto r = gpu_decode_chunk(chunk, mask, chunk_bytes, gpu, &plan);
        INFO("chunk " << k << ": " << r.message);
        REQUIRE(r.ok);
        CHECK(gpu == cpu);
        const std::size_t valid = std::min<std::size_t>(chunk_bytes, (rows - offset[0]) * e);
        CHECK(std::memcmp(gpu.data(), data.data() + offset[0] * e, valid) == 0);
        CHECK(plan.stage_bytes == (c.shuffle || c.fletcher32_first
                                       ? chunk_bytes + (c.fletcher32_first ? 4 : 0)
                                       : 0));
        // One bit flipped in a checksummed chunk: both paths refuse it, in the same words.
        if (c.fletcher32 || c.fletcher32_first) {
          chunk.stored[rng() % chunk.stored.size()] ^= 0x04;
          const auto want = cpu_decode_chunk(chunk, mask, chunk_bytes, cpu);
          const auto got = gpu_decode_chunk(chunk, mask, chunk_bytes, gpu);
          REQUIRE_FALSE(want.ok);
          REQUIRE_FALSE(got.ok);
          CHECK(std::string(got.api) == want.api);
          if (c.fletcher32) CHECK(got.message == "fletcher32 checksum mismatch");
          if (c.fletcher32 || got.api != std::string("libdeflate_zlib_decompress"))
            CHECK(got.message == want.message);
          ++damaged;
        }
        ++chunks;
      }
    }
  }
  CHECK(chunks == 4 * 5 * 3);
  CHECK(damaged == 4 * 4 * 3);
}
