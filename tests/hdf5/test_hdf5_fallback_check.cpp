// Shards read through H5Dread (the fallback) get each chunk checked by gpufeed before HDF5 or a
// filter plugin decodes it (detail/hdf5/fallback_check.hpp): a chunk decoding to fewer bytes
// than the chunk is a corrupt_error instead of heap bytes delivered as records; Bitshuffle
// parameters the plugin crashes on are refused at open; LZ4 and Bitshuffle headers declaring
// gigabytes are refused before the plugin sees them.
//
// The plugin datasets are written with HDF5's plugin loading off and the filter optional, so the
// test needs no plugin: the chunks are made here and stored with H5Dwrite_chunk.
#include <doctest/doctest.h>

#include <H5PLpublic.h>
#include <hdf5.h>
#include <libdeflate.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "chunk_rewrite.hpp"
#include "expect_error.hpp"
#include "gpufeed/hdf5_source.hpp"
#include "h5_writer.hpp"
#include "test_util.hpp"

using namespace gpufeed;
using gpufeed::test::dataset_spec;
using gpufeed::test::h5_check;
using gpufeed::test::h5_file;
using gpufeed::test::h5_id;
using gpufeed::test::has;
namespace fs = std::filesystem;

namespace {

std::vector<unsigned char> zlib_of(const std::vector<unsigned char>& in) {
  libdeflate_compressor* c = libdeflate_alloc_compressor(6);
  REQUIRE(c);
  std::vector<unsigned char> out(libdeflate_zlib_compress_bound(c, in.size()));
  out.resize(libdeflate_zlib_compress(c, in.data(), in.size(), out.data(), out.size()));
  libdeflate_free_compressor(c);
  REQUIRE(!out.empty());
  return out;
}

void put_be(std::vector<unsigned char>& v, std::size_t at, std::uint64_t x, int bytes) {
  for (int i = 0; i < bytes; ++i)
    v[at + static_cast<std::size_t>(i)] =
        static_cast<unsigned char>(x >> (8 * (bytes - 1 - i)));
}

// A 64 x 16 uint8 dataset in chunks of 8 rows with plugin filter `id` (parameters cd, optional),
// whose first chunk holds `chunk0` as stored and whose other chunks are never written (so the
// shard is read through H5Dread).
void write_plugin_dataset(const fs::path& path, H5Z_filter_t id, std::vector<unsigned> cd,
                          const std::vector<unsigned char>& chunk0) {
  unsigned state = 0;
  h5_check(H5PLget_loading_state(&state), "H5PLget_loading_state");
  h5_check(H5PLset_loading_state(0), "H5PLset_loading_state");  // cd stays as given
  struct restore {
    unsigned s;
    ~restore() { H5PLset_loading_state(s); }
  } back{state};
  h5_id f(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose, "H5Fcreate");
  const hsize_t dims[2] = {64, 16}, chunk[2] = {8, 16};
  h5_id space(H5Screate_simple(2, dims, nullptr), H5Sclose, "H5Screate_simple");
  h5_id dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose, "H5Pcreate");
  h5_check(H5Pset_chunk(dcpl, 2, chunk), "H5Pset_chunk");
  h5_check(H5Pset_filter(dcpl, id, H5Z_FLAG_OPTIONAL, cd.size(), cd.data()), "H5Pset_filter");
  h5_id d(H5Dcreate2(f, "data", H5T_STD_U8LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT), H5Dclose,
          "H5Dcreate2");
  const hsize_t origin[2] = {0, 0};
  h5_check(H5Dwrite_chunk(d, H5P_DEFAULT, 0, origin, chunk0.size(), chunk0.data()),
           "H5Dwrite_chunk");
}

std::string corrupt_reading_row(const fs::path& path, std::uint64_t r = 0) {
  hdf5_source src(path);
  CHECK(src.uses_fallback());
  std::vector<std::byte> row(src.record_size(r));
  return gpufeed::test::error_of<corrupt_error>([&] { src.read(r, row); });
}

}  // namespace

TEST_CASE("fallback: a deflate chunk decoding to fewer bytes than the chunk is a corrupt_error") {
  gpufeed::test::temp_dir dir("h5fbshort");
  const auto path = dir / "s.h5";
  const auto data = gpufeed::test::pattern<std::uint8_t>(64 * 16);
  {
    h5_file f(path);
    dataset_spec s;
    s.dims = {64, 16};
    s.chunk = {8, 16};
    s.deflate = 4;
    s.write_rows = 48;  // the last two chunks are never written: the shard falls back
    f.add(s, data);
  }
  // Chunk 0 (rows 0-7, 128 bytes) now holds a valid zlib stream of 64 bytes.
  const std::uint64_t row = gpufeed::test::rewrite_filtered_chunk(path, [](auto& bytes) {
    bytes = zlib_of(std::vector<unsigned char>(64, 7));
  });
  REQUIRE(row == 0);
  hdf5_source src(path);
  REQUIRE(src.uses_fallback());
  std::vector<std::byte> got(16);
  for (int attempt = 0; attempt < 2; ++attempt) {  // refused again, never served from a cache
    const std::string e = gpufeed::test::error_of<corrupt_error>([&] { src.read(3, got); });
    CHECK(has(e, path.string()));
    CHECK(has(e, "fewer than the expected 128 bytes"));
    CHECK(has(e, "chunk at (0, 0)"));
  }
  // The other chunks read exactly; the unwritten ones give the fill value.
  src.read(9, got);
  CHECK(std::memcmp(got.data(), data.data() + 9 * 16, 16) == 0);
  src.read(60, got);
  CHECK(got == std::vector<std::byte>(16, std::byte{0}));
}

TEST_CASE("fallback: an unfiltered chunk of the wrong size is refused before H5Dread") {
  gpufeed::test::temp_dir dir("h5fbraw");
  const auto path = dir / "r.h5";
  // Chunk 1 (rows 8-15) skips deflate (mask 1): it is unfiltered and holds 100 bytes. Chunk 0 is
  // never written, so the index stops there and the shard falls back.
  {
    h5_id f(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose, "H5Fcreate");
    const hsize_t dims[2] = {64, 16}, chunk[2] = {8, 16};
    h5_id space(H5Screate_simple(2, dims, nullptr), H5Sclose, "H5Screate_simple");
    h5_id dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose, "H5Pcreate");
    h5_check(H5Pset_chunk(dcpl, 2, chunk), "H5Pset_chunk");
    h5_check(H5Pset_deflate(dcpl, 1), "H5Pset_deflate");
    h5_id d(H5Dcreate2(f, "data", H5T_STD_U8LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT), H5Dclose,
            "H5Dcreate2");
    const hsize_t origin[2] = {8, 0};
    const std::vector<unsigned char> bytes(100, 5);
    h5_check(H5Dwrite_chunk(d, H5P_DEFAULT, 1, origin, bytes.size(), bytes.data()),
             "H5Dwrite_chunk");
  }
  const std::string e = corrupt_reading_row(path, 9);
  CHECK(has(e, path.string()));
  CHECK(has(e, "decodes to 100 bytes, not its 128"));
  CHECK(has(e, "chunk at (8, 0)"));
}

TEST_CASE("Bitshuffle parameters the plugin crashes on: format_error at open") {
  gpufeed::test::temp_dir dir("h5fbbs");
  const auto path = dir / "b.h5";
  const std::vector<unsigned char> chunk(128, 1);
  // cd: version major, minor, element size, block size, compression
  write_plugin_dataset(path, 32008, {0, 3, 0, 0, 0}, chunk);  // element size 0: SIGFPE
  std::string e = gpufeed::test::error_of<format_error>([&] { hdf5_source src(path); });
  CHECK(has(e, path.string()));
  CHECK(has(e, "element size 0"));
  write_plugin_dataset(path, 32008, {0, 3, 1, 0, 7}, chunk);  // unknown compression code
  e = gpufeed::test::error_of<format_error>([&] { hdf5_source src(path); });
  CHECK(has(e, "compression code 7"));
}

TEST_CASE("fallback: LZ4 and Bitshuffle headers declaring 3 GiB or 2^34 bytes: corrupt_error") {
  gpufeed::test::temp_dir dir("h5fbhdr");
  const auto path = dir / "h.h5";
  for (const std::uint64_t declared : {std::uint64_t{3} << 30, std::uint64_t{1} << 34}) {
    CAPTURE(declared);
    std::vector<unsigned char> chunk(40, 0);
    put_be(chunk, 0, declared, 8);  // total decoded bytes
    put_be(chunk, 8, 128, 4);       // block size
    put_be(chunk, 12, 20, 4);       // one block of 20 bytes
    write_plugin_dataset(path, 32004, {}, chunk);  // the LZ4 filter
    std::string e = corrupt_reading_row(path);
    CHECK(has(e, path.string()));
    CHECK(has(e, "header says " + std::to_string(declared)));
    write_plugin_dataset(path, 32008, {0, 3, 1, 0, 2}, chunk);  // Bitshuffle + LZ4
    e = corrupt_reading_row(path);
    CHECK(has(e, "header says " + std::to_string(declared)));
  }
}

TEST_CASE("2^22 never-written chunks in a small file: no chunk table, H5Dread with the fill value") {
  gpufeed::test::temp_dir dir("h5fbmany");
  const auto path = dir / "m.h5";
  {
    h5_file f(path);
    dataset_spec s;
    s.dims = {hsize_t{1} << 22};
    s.chunk = {1};
    s.write = false;
    f.add(s, std::vector<std::uint8_t>(std::size_t{1} << 22));
  }
  REQUIRE(fs::file_size(path) < 4096);
  hdf5_source src(path);
  CHECK(src.uses_fallback());
  // Refused before a table of 2^22 entries was built (the reason names the bound, not a chunk).
  CHECK(has(src.shards()[0].fallback_reason, "4194304 chunks in a file of"));
  std::vector<std::byte> got(1, std::byte{9});
  src.read(12345, got);
  CHECK(got[0] == std::byte{0});
}

TEST_CASE("a chunk declaring more decoded bytes than the file can hold: format_error at open") {
  gpufeed::test::temp_dir dir("h5fbbig");
  const auto path = dir / "b.h5";
  {
    h5_file f(path);
    dataset_spec s;
    s.dims = {4, 16};
    s.chunk = {hsize_t{1} << 23, 16};  // 128 MiB decoded, in a file of a few KiB
    s.unlimited = true;
    s.deflate = 1;
    s.write = false;
    f.add(s, std::vector<std::uint8_t>(64));
  }
  const std::string e = gpufeed::test::error_of<format_error>([&] { hdf5_source src(path); });
  CHECK(has(e, path.string()));
  CHECK(has(e, "declares a chunk of 134217728 bytes"));
}

TEST_CASE("fallback: an unfiltered chunk whose index entry disagrees with its storage size") {
  // A fuzzed file (kept as a seed): no filters, the first chunk's index entry says 12 bytes while
  // H5Dget_chunk_storage_size says the nominal 128. H5Dread copied 128 bytes out of a 12-byte
  // buffer (heap bytes as records); the check reads where H5Dread reads and refuses it.
  const fs::path seed = fs::path(GPUFEED_HDF5_SEEDS) / "fallback_unfiltered_extent.h5";
  hdf5_source src(seed);
  REQUIRE(src.uses_fallback());
  std::vector<std::byte> row(16);
  const std::string e = gpufeed::test::error_of<corrupt_error>([&] { src.read(0, row); });
  CHECK(has(e, seed.string()));
  CHECK(has(e, "decodes to 12 bytes, not its 128"));
}
