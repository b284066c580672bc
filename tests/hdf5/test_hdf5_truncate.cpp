// Shards truncated or replaced while a source has them open, on the three read paths (raw
// pread, pread + gzip decode, the H5Dread fallback). A record is delivered with its exact bytes
// or fails with io_error naming the file and record; never zeros or another record's bytes.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "gpufeed/hdf5_source.hpp"
#include "h5_writer.hpp"
#include "test_util.hpp"

using namespace gpufeed;
using gpufeed::test::dataset_spec;
using gpufeed::test::h5_file;

namespace {
constexpr std::size_t rows = 4000, cols = 16;

std::vector<std::int32_t> values(unsigned seed) {
  auto v = gpufeed::test::pattern<std::int32_t>(rows * cols, seed);
  for (auto& x : v) x %= (1 << 23);
  return v;
}

// kind 0 raw, 1 gzip, 2 fallback (24-bit precision: HDF5 converts)
void write_shard(const std::filesystem::path& path, int kind, unsigned seed) {
  h5_file f(path);
  dataset_spec s;
  s.file_type = H5T_STD_I32LE;
  s.mem_type = H5T_NATIVE_INT32;
  s.dims = {rows, cols};
  gpufeed::test::h5_id t24(H5Tcopy(H5T_STD_I32LE), H5Tclose, "H5Tcopy");
  if (kind == 1) {
    s.chunk = {10, cols};
    s.deflate = 4;
  } else if (kind == 2) {
    gpufeed::test::h5_check(H5Tset_precision(t24, 24), "H5Tset_precision");
    s.file_type = t24;
  }
  f.add(s, values(seed));
}
}  // namespace

TEST_CASE("a shard truncated while open: exact bytes or io_error naming file and record") {
  gpufeed::test::temp_dir dir("h5trunc");
  const auto v = values(3);
  for (int kind = 0; kind < 3; ++kind) {
    CAPTURE(kind);
    const auto path = dir / ("t" + std::to_string(kind) + ".h5");
    write_shard(path, kind, 3);
    hdf5_source src(path);
    const auto size = std::filesystem::file_size(path);
    std::filesystem::resize_file(path, size * 2 / 5);
    auto r = src.make_reader();
    std::vector<std::byte> buf(src.max_record_size());
    std::size_t wrong = 0, failed = 0, failed_tail = 0;
    for (std::uint64_t i = 0; i < src.size(); ++i) {
      std::memset(buf.data(), 0x5a, buf.size());
      try {
        r.read(i, buf);
        wrong += std::memcmp(buf.data(), v.data() + i * cols, cols * 4) != 0;
      } catch (const io_error& e) {
        ++failed;
        failed_tail += i >= rows / 2;  // wholly past the cut on every path
        CHECK(e.file() == path.string());
        CHECK(e.record() == i);
      }
    }
    CHECK(wrong == 0);
    CHECK(failed_tail == rows / 2);
    CHECK(failed >= rows / 2);
  }
}

TEST_CASE("a shard replaced (rename over it) while open: the open file's bytes, exactly") {
  gpufeed::test::temp_dir dir("h5repl");
  const auto v = values(4);
  for (int kind = 0; kind < 3; ++kind) {
    CAPTURE(kind);
    const auto path = dir / ("r" + std::to_string(kind) + ".h5");
    write_shard(path, kind, 4);
    hdf5_source src(path);
    write_shard(dir / "new.h5", kind, 9);
    std::filesystem::rename(dir / "new.h5", path);
    auto r = src.make_reader();
    std::vector<std::byte> buf(src.max_record_size());
    std::size_t wrong = 0;
    for (std::uint64_t i = 0; i < src.size(); ++i) {
      r.read(i, buf);
      wrong += std::memcmp(buf.data(), v.data() + i * cols, cols * 4) != 0;
    }
    CHECK(wrong == 0);
  }
}
