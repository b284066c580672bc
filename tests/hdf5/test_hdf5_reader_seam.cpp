// The byte-source seam under the HDF5 reader (gpufeed/detail/io/byte_source.hpp): a shard opened
// with a test double for its reader (support/memory_bytes.hpp: the file's bytes in memory) reads
// every record through it — raw rows, deflate chunks, runs of adjacent rows — with the file
// itself gone from disk; the double cut short gives the truncation error naming file and record;
// read-ahead advice reaches it; the signature and layout checks read through it too.
#include <doctest/doctest.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <sys/uio.h>

#include "gpufeed/detail/hdf5/adjacent_read.hpp"
#include "gpufeed/detail/hdf5/layout_precheck.hpp"
#include "gpufeed/detail/hdf5/open_shard.hpp"
#include "gpufeed/detail/hdf5/read_ahead.hpp"
#include "gpufeed/detail/hdf5/record_reader.hpp"
#include "gpufeed/detail/io/posix_file.hpp"
#include "gpufeed/detail/unit_cache/shared_chunk_cache.hpp"
#include "gpufeed/hdf5_options.hpp"
#include "h5_writer.hpp"
#include "hdf5_test_util.hpp"
#include "memory_bytes.hpp"
#include "test_util.hpp"

using namespace gpufeed;
namespace h = gpufeed::detail::hdf5;
namespace io = gpufeed::detail::io;
using gpufeed::test::memory_bytes;

namespace {

constexpr std::size_t rows = 600, cols = 16;  // int32: 64-byte records

std::vector<std::int32_t> values(unsigned seed) {
  return gpufeed::test::pattern<std::int32_t>(rows * cols, seed);
}

// kind 0: contiguous little-endian; 1: contiguous big-endian (bytes swapped after reading);
// 2: chunked, deflate.
std::filesystem::path write_shard(const std::filesystem::path& path, int kind,
                                  const std::vector<std::int32_t>& v) {
  gpufeed::test::h5_file f(path);
  gpufeed::test::dataset_spec s;
  s.file_type = kind == 1 ? H5T_STD_I32BE : H5T_STD_I32LE;
  s.mem_type = H5T_NATIVE_INT32;
  s.dims = {rows, cols};
  if (kind == 2) {
    s.chunk = {10, cols};
    s.deflate = 4;
  }
  f.add(s, v);
  return path;
}

// Shard `path` opened with the double over its bytes; the double stays reachable through *m.
h::shard_index open_with_double(const std::filesystem::path& path, memory_bytes*& m) {
  auto d = std::make_unique<memory_bytes>(memory_bytes::file_bytes(path), path.string());
  m = d.get();
  return h::open_shard(path, hdf5_options{}, io::owned_source(std::move(d)));
}

}  // namespace

TEST_CASE("a shard read through a test double: every record, with the file gone from disk") {
  gpufeed::test::temp_dir dir("h5seam");
  for (int kind = 0; kind < 3; ++kind) {
    CAPTURE(kind);
    const auto v = values(10 + static_cast<unsigned>(kind));
    const auto expected = gpufeed::test::rows_of(v, cols);
    const auto path = write_shard(dir / ("s" + std::to_string(kind) + ".h5"), kind, v);
    memory_bytes* m = nullptr;
    const h::shard_index s = open_with_double(path, m);
    REQUIRE(s.file.as<memory_bytes>() == m);
    CHECK(s.kind == (kind == 2 ? h::read_kind::chunked : h::read_kind::contiguous));
    std::filesystem::remove(path);  // only the double holds the bytes now

    detail::unit_cache::shared_chunk_cache cache(std::size_t{1} << 20);
    h::record_reader reader(cache);
    const long before = m->reads() + m->scatter_reads();
    std::vector<std::byte> got(cols * 4);
    std::size_t wrong = 0;
    for (std::uint64_t i = 0; i < rows; ++i) {
      std::memset(got.data(), 0x5a, got.size());
      reader.read(s, 0, i, i, got);
      wrong += got != expected[i];
    }
    CHECK(wrong == 0);
    CHECK(m->reads() + m->scatter_reads() > before);  // the records came through the double

    // Read-ahead advice reaches the reader.
    const long advised = m->advised();
    h::advise_records(s, 0, rows);
    CHECK(m->advised() > advised);

    if (kind == 2) continue;
    // A run of adjacent rows: one scatter read through the double.
    std::vector<std::vector<std::byte>> run(40, std::vector<std::byte>(cols * 4));
    std::vector<std::span<std::byte>> dst(run.begin(), run.end());
    std::vector<iovec> iov;
    const long scatter = m->scatter_reads();
    h::read_adjacent(s, 100, 100, dst, iov);
    CHECK(m->scatter_reads() == scatter + 1);
    for (std::size_t j = 0; j < run.size(); ++j) CHECK(run[j] == expected[100 + j]);
  }
}

TEST_CASE("a test double cut short: the truncation error naming file and record, never zeros") {
  gpufeed::test::temp_dir dir("h5seamcut");
  for (int kind : {0, 2}) {
    CAPTURE(kind);
    const auto v = values(20);
    const auto expected = gpufeed::test::rows_of(v, cols);
    const auto path = write_shard(dir / ("c" + std::to_string(kind) + ".h5"), kind, v);
    memory_bytes* m = nullptr;
    const h::shard_index s = open_with_double(path, m);
    m->cut(static_cast<std::size_t>(s.file.size() / 3));
    detail::unit_cache::shared_chunk_cache cache(std::size_t{1} << 20);
    h::record_reader reader(cache);
    std::vector<std::byte> got(cols * 4);
    std::size_t wrong = 0, failed = 0;
    for (std::uint64_t i = 0; i < rows; ++i) {
      try {
        reader.read(s, 0, i, 1000 + i, got);
        wrong += got != expected[i];
      } catch (const io_error& e) {
        ++failed;
        CHECK(e.file() == path.string());
        CHECK(e.record() == 1000 + i);
        CHECK(e.api() == "memory");
        CHECK(e.message().find("the file was truncated after it was opened?") != std::string::npos);
      }
    }
    CHECK(wrong == 0);
    CHECK(failed > rows / 2);
  }
}

TEST_CASE("the signature and layout checks read through the reader they are given") {
  gpufeed::test::temp_dir dir("h5seamsig");
  const auto path = write_shard(dir / "l.h5", 2, values(30));
  const auto bytes = memory_bytes::file_bytes(path);
  const memory_bytes hdf5(bytes, path.string());
  CHECK(h::has_hdf5_signature(hdf5));
  CHECK(hdf5.reads() > 0);
  std::vector<std::byte> plain(bytes.size(), std::byte{7});
  CHECK_FALSE(h::has_hdf5_signature(memory_bytes(plain, "plain")));

  // The chunk layout read from the double's bytes is the one read with pread.
  const h::library_lock lock;
  const h::handle fid(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  REQUIRE(fid.valid());
  const memory_bytes layout_bytes(bytes, path.string());
  const auto from_double = h::read_chunk_layout(fid.get(), layout_bytes, "data");
  const auto from_file = h::read_chunk_layout(fid.get(), io::posix_file(path), "data");
  REQUIRE(from_double);
  REQUIRE(from_file);
  CHECK(from_double->dims == from_file->dims);
  CHECK(from_double->dims == std::vector<std::uint64_t>{10, cols, 4});
  CHECK(layout_bytes.reads() > 0);

  // Opened without a reader, a shard reads with pread.
  const h::shard_index s = h::open_shard(path, hdf5_options{});
  CHECK(s.file.as<io::posix_file>() != nullptr);
}
