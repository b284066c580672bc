// Shards truncated or replaced while a source has them open, on the three read paths (raw
// data through a memory map or pread, pread + gzip decode, the H5Dread fallback). A record is
// delivered with its exact bytes or fails with io_error naming the file and record; never zeros
// or another record's bytes — also in the new last page of a mapped file, which reads as zeros
// without a fault.
#include <doctest/doctest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "gpufeed/detail/io/map_fault_guard.hpp"
#include "gpufeed/hdf5_source.hpp"
#include "gpufeed/loader.hpp"
#include "h5_writer.hpp"
#include "test_util.hpp"

using namespace gpufeed;
using gpufeed::test::dataset_spec;
using gpufeed::test::h5_file;

namespace {
constexpr std::size_t rows = 4000, cols = 16;

// A map of a truncated file faults (SIGBUS) past its new end: guarded except under
// ThreadSanitizer, where those cases are skipped (and automatic reads with pread).
constexpr bool map_guarded = gpufeed::detail::io::map_faults_guarded;
bool skipped_unguarded(hdf5_options::read_method m) {
  if (map_guarded || m == hdf5_options::read_method::pread) return false;
  MESSAGE("a mapped case skipped: the SIGBUS guard does not work under ThreadSanitizer");
  return true;
}

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
  for (int kind = 0; kind < 3; ++kind)
  for (const auto method : {hdf5_options::read_method::pread, hdf5_options::read_method::map}) {
    CAPTURE(kind);
    CAPTURE(static_cast<int>(method));
    if (skipped_unguarded(method)) continue;
    const auto path = dir / ("t" + std::to_string(kind) + ".h5");
    write_shard(path, kind, 3);
    hdf5_options o;
    o.reads = method;
    hdf5_source src(path, o);
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

namespace {
// Where row 0 of shard `path` (values v) lies in its file: found by its bytes.
std::uint64_t data_offset(const std::filesystem::path& path, const std::vector<std::int32_t>& v) {
  std::ifstream in(path, std::ios::binary);
  const std::string file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string row0(reinterpret_cast<const char*>(v.data()), cols * 4);
  const auto at = file.find(row0);
  REQUIRE(at != std::string::npos);
  return at;
}
}  // namespace

TEST_CASE("a shard cut inside a page: records past the cut fail, none reads zeros (map, pread)") {
  // Through a memory map the new last page past the cut reads as zeros without a fault: the
  // reads are confirmed (each by itself for a reader, per task in the loader), so those records
  // fail like the ones past it. The same holds for pread.
  gpufeed::test::temp_dir dir("h5cut");
  const auto v = values(5);
  const long page = ::sysconf(_SC_PAGESIZE);
  for (const auto method : {hdf5_options::read_method::automatic, hdf5_options::read_method::map,
                            hdf5_options::read_method::pread}) {
    CAPTURE(static_cast<int>(method));
    if (skipped_unguarded(method)) continue;
    const auto path = dir / "c.h5";
    write_shard(path, 0, 5);
    hdf5_options o;
    o.reads = method;
    hdf5_source src(path, o);
    REQUIRE(src.shards().size() == 1);
    CHECK(src.shards()[0].mapped == (method != hdf5_options::read_method::pread));
    const std::uint64_t base = data_offset(path, v);
    // A cut 100 bytes into a page well inside the data: rows wholly below it stand.
    const std::uint64_t cut = (base + rows * cols * 2) / page * page + 100;
    const std::uint64_t whole = (cut - base) / (cols * 4);  // rows that end at or before the cut
    REQUIRE(whole < rows);
    std::filesystem::resize_file(path, cut);
    auto r = src.make_reader();
    std::vector<std::byte> buf(src.max_record_size());
    std::size_t wrong = 0, failed_below = 0, stood_above = 0;
    for (std::uint64_t i = 0; i < src.size(); ++i) {
      std::memset(buf.data(), 0x5a, buf.size());
      try {
        r.read(i, buf);
        wrong += std::memcmp(buf.data(), v.data() + i * cols, cols * 4) != 0;
        stood_above += i >= whole;
      } catch (const io_error& e) {
        failed_below += i < whole;
        CHECK(e.file() == path.string());
        CHECK(e.record() == i);
      }
    }
    CHECK(wrong == 0);
    CHECK(failed_below == 0);
    CHECK(stood_above == 0);
    // The loader: every record below the cut once with its bytes, every other one skipped.
    for (const auto order : {sample_order::sequential, sample_order::shuffled,
                             sample_order::block_shuffled}) {
      CAPTURE(static_cast<int>(order));
      loader_config c;
      c.batch_size = 128;
      c.order = order;
      c.workers = 3;
      c.epochs = 1;
      c.on_error = error_policy::skip;
      loader<hdf5_source> l(src, c);
      std::vector<std::uint64_t> seen;
      std::size_t lwrong = 0;
      while (auto b = l.next())
        for (std::size_t k = 0; k < b->size(); ++k) {
          const auto i = b->indices()[k];
          lwrong += std::memcmp(b->record(k).data(), v.data() + i * cols, cols * 4) != 0;
          seen.push_back(i);
        }
      CHECK(lwrong == 0);
      std::sort(seen.begin(), seen.end());
      REQUIRE(seen.size() == whole);
      for (std::uint64_t j = 0; j < whole; ++j) CHECK(seen[j] == j);
      CHECK(l.stats().skipped == rows - whole);
    }
    std::filesystem::remove(path);
  }
}

TEST_CASE("hdf5_options::reads: which shards are mapped, and the same bytes either way") {
  gpufeed::test::temp_dir dir("h5reads");
  const auto v = values(6);
  for (int kind = 0; kind < 3; ++kind) {
    CAPTURE(kind);
    const auto path = dir / ("m" + std::to_string(kind) + ".h5");
    write_shard(path, kind, 6);
    for (const auto method : {hdf5_options::read_method::automatic,
                              hdf5_options::read_method::map, hdf5_options::read_method::pread}) {
      CAPTURE(static_cast<int>(method));
      hdf5_options o;
      o.reads = method;
      hdf5_source src(path, o);
      const bool mapped = src.shards()[0].mapped;
      if (kind == 2 || method == hdf5_options::read_method::pread) CHECK_FALSE(mapped);  // fallback
      else if (method == hdf5_options::read_method::map) CHECK(mapped);
      else CHECK(mapped == (kind == 0 && map_guarded));  // automatic: raw data, not gzip chunks
      std::vector<std::byte> buf(src.max_record_size());
      std::size_t wrong = 0;
      for (std::uint64_t i = 0; i < src.size(); ++i) {
        src.read(i, buf);
        wrong += std::memcmp(buf.data(), v.data() + i * cols, cols * 4) != 0;
      }
      CHECK(wrong == 0);
    }
  }
}
