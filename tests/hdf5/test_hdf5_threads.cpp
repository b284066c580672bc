// 12 threads read random records concurrently — half with their own reader, half through the
// thread-safe read() — across raw, decoded and fallback shards; every byte is compared.
#include <doctest/doctest.h>

#include <atomic>
#include <cstdint>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gpufeed/hdf5_source.hpp"
#include "h5_writer.hpp"
#include "hdf5_test_util.hpp"
#include "test_util.hpp"

using namespace gpufeed;
using gpufeed::test::dataset_spec;
using gpufeed::test::h5_file;
using gpufeed::test::pattern;
using gpufeed::test::rows_of;

namespace {

// Returns the number of mismatching reads over `threads` threads x `reads` random records.
std::size_t hammer(const hdf5_source& src, const std::vector<std::vector<std::byte>>& expected,
                   int threads, int reads) {
  std::atomic<std::size_t> bad{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      std::mt19937_64 rng(static_cast<std::uint64_t>(t) * 7 + 1);
      std::uniform_int_distribution<std::uint64_t> pick(0, src.size() - 1);
      auto reader = src.make_reader();
      std::vector<std::byte> buf(src.max_record_size() + 1);
      for (int k = 0; k < reads; ++k) {
        const std::uint64_t i = pick(rng);
        const auto& want = expected[static_cast<std::size_t>(i)];
        try {
          if (t % 2 == 0)
            reader.read(i, buf);
          else
            src.read(i, buf);
          if (src.record_size(i) != want.size() ||
              !std::equal(want.begin(), want.end(), buf.begin()))
            ++bad;
        } catch (const std::exception&) {
          ++bad;
        }
        if (k % 97 == 0) reader.idle();
      }
    });
  }
  for (auto& th : pool) th.join();
  return bad.load();
}

}  // namespace

TEST_CASE("fixed layout: raw, decoded and fallback shards read from 12 threads") {
  gpufeed::test::temp_dir dir("h5th");
  std::vector<std::filesystem::path> paths;
  std::vector<std::vector<std::byte>> expected;
  for (int k = 0; k < 4; ++k) {
    const auto v = pattern<std::int16_t>(120 * 4 * 6, 40 + k);
    const auto path = dir / ("t" + std::to_string(k) + ".h5");
    h5_file f(path);
    dataset_spec s;
    s.file_type = k == 1 ? H5T_STD_I16BE : H5T_STD_I16LE;
    s.mem_type = H5T_NATIVE_INT16;
    s.dims = {120, 4, 6};
    if (k == 1) s.chunk = {3, 2, 4};  // rows split across chunks, several rows per chunk
    if (k == 1) s.shuffle = s.fletcher32 = true;
    if (k == 1) s.deflate = 4;
    if (k == 2) s.chunk = {8, 4, 6};  // unfiltered chunks
    s.compact = k == 3;               // fallback
    f.add(s, v);
    for (auto& r : rows_of(v, 24)) expected.push_back(std::move(r));
    paths.push_back(path);
  }
  hdf5_source src(paths);
  CHECK(src.shards()[0].read_path == hdf5_read_path::pread_raw);
  CHECK(src.shards()[1].read_path == hdf5_read_path::pread_decode);
  CHECK(src.shards()[2].read_path == hdf5_read_path::pread_raw);
  CHECK(src.shards()[3].read_path == hdf5_read_path::h5dread_fallback);
  CHECK(hammer(src, expected, 12, 1500) == 0);
}

TEST_CASE("blob layout: contiguous and chunked+deflate shards read from 16 threads") {
  gpufeed::test::temp_dir dir("h5tb");
  std::vector<std::filesystem::path> paths;
  std::vector<std::vector<std::byte>> expected;
  for (int k = 0; k < 2; ++k) {
    const auto bytes = pattern<std::uint8_t>(400 * 200, 50 + k);
    const auto sizes = pattern<std::uint16_t>(400, 60 + k);
    std::vector<std::uint64_t> offsets{0};
    for (std::size_t i = 0; i < 400; ++i) {
      const std::size_t len = sizes[i] % 200;
      const auto* p = reinterpret_cast<const std::byte*>(bytes.data()) + offsets.back();
      expected.emplace_back(p, p + len);
      offsets.push_back(offsets.back() + len);
    }
    const auto path = dir / ("b" + std::to_string(k) + ".h5");
    h5_file f(path);
    dataset_spec d;
    d.dims = {offsets.back()};
    if (k == 1) d.chunk = {150};
    if (k == 1) d.deflate = 5;
    f.add(d, std::vector<std::uint8_t>(bytes.begin(), bytes.begin() + offsets.back()));
    f.add_offsets(offsets);
    paths.push_back(path);
  }
  hdf5_source src(paths);
  CHECK(src.size() == 800);
  CHECK(hammer(src, expected, 16, 1000) == 0);
}
