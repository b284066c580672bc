// Lazy shard opening: a source over many shards opens only the first at construction and each
// other one when a record of it is first used; descriptors are counted in /proc/self/fd. Record
// counts and sizes come from pack's manifest (or header reads); a bad shard's typed error names
// it at first use; many threads touching one shard first at once open it once; a loader over
// them delivers the bad shard as the batch's error or skips its records (never a crash).
#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <barrier>
#include <chrono>
#include <future>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "expect_error.hpp"
#include "gpufeed/hdf5_source.hpp"
#include "gpufeed/loader.hpp"
#include "gpufeed/pack/detail/manifest.hpp"
#include "h5_writer.hpp"
#include "fd_count.hpp"
#include "test_util.hpp"

using namespace gpufeed;
using gpufeed::test::dataset_spec;
using gpufeed::test::h5_file;
namespace fs = std::filesystem;
using gpufeed::test::fds_under;

namespace {

constexpr int shard_count = 12;

// Shard k holds 10 + k records; record r of it is (r % 7) + 1 + k bytes, byte j = k + r + j.
std::vector<std::uint8_t> record(int k, std::uint64_t r) {
  std::vector<std::uint8_t> v(static_cast<std::size_t>(r % 7 + 1 + k));
  for (std::size_t j = 0; j < v.size(); ++j) v[j] = static_cast<std::uint8_t>(k + r + j);
  return v;
}
std::uint64_t records_of(int k) { return 10 + static_cast<std::uint64_t>(k); }

fs::path shard_path(const fs::path& dir, int k) {
  return dir / ("s-" + std::to_string(10000 + k) + ".h5");
}

std::uint64_t write_shard(const fs::path& p, int k) {
  std::vector<std::uint8_t> data;
  std::vector<std::uint64_t> offsets{0};
  std::uint64_t max = 0;
  for (std::uint64_t r = 0; r < records_of(k); ++r) {
    const auto v = record(k, r);
    data.insert(data.end(), v.begin(), v.end());
    offsets.push_back(data.size());
    max = std::max<std::uint64_t>(max, v.size());
  }
  h5_file f(p);
  dataset_spec d;
  d.dims = {data.size()};
  f.add(d, data);
  f.add_offsets(offsets);
  return max;
}

// The shards and, with `manifest`, pack's manifest listing them (records, max_record).
std::vector<fs::path> write_shards(const fs::path& dir, bool manifest,
                                   std::uint64_t lie_about = ~0ull) {
  detail::pack::manifest_data m;
  m.format = "hdf5";
  std::vector<fs::path> paths;
  std::uint64_t first = 0;
  for (int k = 0; k < shard_count; ++k) {
    paths.push_back(shard_path(dir, k));
    detail::pack::manifest_shard s;
    s.file = paths.back().filename().string();
    s.records = records_of(k) + (static_cast<std::uint64_t>(k) == lie_about ? 1 : 0);
    s.first_record = first;
    s.max_record = write_shard(paths.back(), k);
    first += records_of(k);
    m.shards.push_back(s);
  }
  m.records = first;
  if (manifest) std::ofstream(dir / "manifest.json") << detail::pack::manifest_text(m);
  return paths;
}

std::uint64_t first_of(int k) {
  std::uint64_t f = 0;
  for (int j = 0; j < k; ++j) f += records_of(j);
  return f;
}

void check_record(const hdf5_source& src, int k, std::uint64_t r) {
  const auto want = record(k, r);
  const std::uint64_t i = first_of(k) + r;
  REQUIRE(src.record_size(i) == want.size());
  std::vector<std::byte> got(want.size());
  src.read(i, got);
  CHECK(std::memcmp(got.data(), want.data(), want.size()) == 0);
}

// Replaces `p` with a FIFO.
void make_fifo(const fs::path& p) {
  fs::remove(p);
  REQUIRE(::mkfifo(p.c_str(), 0600) == 0);
}

// Runs f (which must throw io_error) on another thread. If it is still running after 20 s it is
// blocked in open(2) on the FIFO `fifo`: the test fails, and the FIFO's write end is opened so
// that the blocked open returns and the thread can be joined.
template <class F>
std::string io_error_without_hanging(const fs::path& fifo, F&& f) {
  auto done = std::async(std::launch::async, [&] { return test::error_of<io_error>(f); });
  if (done.wait_for(std::chrono::seconds(20)) != std::future_status::ready) {
    FAIL_CHECK("blocked opening a FIFO");
    const int w = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
    if (w >= 0) ::close(w);
  }
  return done.get();
}

}  // namespace

TEST_CASE("a FIFO in place of a shard: io_error naming it, at construction and at lazy open") {
  test::temp_dir dir("lazyfifo");
  const auto paths = write_shards(dir.path(), true);
  make_fifo(paths[5]);
  hdf5_source src(paths);  // the manifest says what shard 5 holds: construction does not open it
  std::vector<std::byte> buf(src.max_record_size());
  const std::string lazy =
      io_error_without_hanging(paths[5], [&] { src.read(first_of(5) + 1, buf); });
  CHECK(test::has(lazy, paths[5].string()));
  CHECK(test::has(lazy, "not a regular file"));
  check_record(src, 4, 3);
  // The first shard, opened at construction; and any shard with header reads (no manifest).
  make_fifo(paths[0]);
  const std::string first = io_error_without_hanging(paths[0], [&] { hdf5_source s(paths); });
  CHECK(test::has(first, paths[0].string()));
  test::temp_dir plain("lazyfifo2");
  const auto p2 = write_shards(plain.path(), false);
  make_fifo(p2[5]);
  CHECK(test::has(io_error_without_hanging(p2[5], [&] { hdf5_source s(p2); }), p2[5].string()));
}

TEST_CASE("lazy: only the first shard is open after construction; each touched shard opens once") {
  for (const bool manifest : {true, false}) {
    CAPTURE(manifest);
    test::temp_dir dir("lazy");
    const auto paths = write_shards(dir.path(), manifest);
    const fs::path real = fs::canonical(dir.path());
    hdf5_source src(paths);
    std::uint64_t total = 0, max = 0;
    for (int k = 0; k < shard_count; ++k) {
      total += records_of(k);
      max = std::max<std::uint64_t>(max, record(k, 6).size());
    }
    CHECK(src.size() == total);           // the record space is whole before any open
    CHECK(src.max_record_size() == max);  // and the largest record is known (the slots' size)
    CHECK(src.shards_opened() == 1);
    CHECK(fds_under(real) == 1);
    CHECK_FALSE(src.shard_info(5).opened);
    CHECK(src.shard_info(5).records == records_of(5));
    // A partition touching shards 3 and 7 (as rank 3 of 8 of a blocked split of 12 shards
    // touches one or two): their records, and nothing else, open.
    for (std::uint64_t r = 0; r < records_of(3); ++r) check_record(src, 3, r);
    check_record(src, 7, 4);
    check_record(src, 7, 0);
    CHECK(src.shards_opened() == 3);
    CHECK(fds_under(real) == 3);
    CHECK(src.shard_info(7).opened);
    CHECK(src.shard_info(7).first_record == first_of(7));
    // shards() describes every shard: that opens them all.
    CHECK(src.shards().size() == shard_count);
    CHECK(src.shards_opened() == shard_count);
    CHECK(fds_under(real) == shard_count);
    for (int k = 0; k < shard_count; ++k) check_record(src, k, records_of(k) - 1);
  }
}

TEST_CASE("eager opens every shard at construction") {
  test::temp_dir dir("eager");
  const auto paths = write_shards(dir.path(), true);
  hdf5_options o;
  o.open = hdf5_options::open_kind::eager;
  hdf5_source src(paths, o);
  CHECK(src.shards_opened() == shard_count);
  CHECK(fds_under(fs::canonical(dir.path())) == shard_count);
  for (int k = 0; k < shard_count; ++k) check_record(src, k, 2);
}

TEST_CASE("a bad shard: its typed error names it at first use, again on each use; others read") {
  test::temp_dir dir("lazybad");
  const auto paths = write_shards(dir.path(), true);
  std::ofstream(paths[5], std::ios::trunc) << "not an HDF5 file at all\n";
  hdf5_source src(paths);  // the manifest says what shard 5 holds: construction does not open it
  std::vector<std::byte> buf(src.max_record_size());
  for (int attempt = 0; attempt < 2; ++attempt) {
    const std::string e =
        test::error_of<format_error>([&] { src.read(first_of(5) + 1, buf); });
    CHECK(test::has(e, paths[5].string()));
    CHECK(test::has(e, "not an HDF5 file"));
  }
  check_record(src, 4, 3);
  check_record(src, 6, 3);
  // Header reads (no manifest) must read it at construction: the error comes from there.
  test::temp_dir plain("lazybad2");
  const auto p2 = write_shards(plain.path(), false);
  std::ofstream(p2[5], std::ios::trunc) << "not an HDF5 file at all\n";
  CHECK(test::has(test::error_of<format_error>([&] { hdf5_source s(p2); }), p2[5].string()));
}

TEST_CASE("a manifest that no longer matches its shard: format_error naming the shard") {
  test::temp_dir dir("stale");
  const auto paths = write_shards(dir.path(), true, /*lie_about=*/4);
  hdf5_source src(paths);
  CHECK(src.size() == first_of(shard_count) + 1);
  std::vector<std::byte> buf(src.max_record_size());
  const std::string e = test::error_of<format_error>([&] { src.read(first_of(4), buf); });
  CHECK(test::has(e, paths[4].string()));
  CHECK(test::has(e, "manifest"));
}

TEST_CASE("many threads touching unopened shards at once: each opens once, every byte right") {
  test::temp_dir dir("race");
  const auto paths = write_shards(dir.path(), true);
  hdf5_source src(paths);
  constexpr int threads = 8;
  std::barrier sync(threads);
  std::atomic<int> bad{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      auto reader = src.make_reader();
      for (int k = 1; k < shard_count; ++k) {
        sync.arrive_and_wait();  // all threads hit shard k first at the same moment
        const std::uint64_t r = static_cast<std::uint64_t>(t) % records_of(k);
        const auto want = record(k, r);
        std::vector<std::byte> got(want.size());
        reader.read(first_of(k) + r, got);
        if (std::memcmp(got.data(), want.data(), want.size()) != 0) bad.fetch_add(1);
      }
    });
  for (auto& t : pool) t.join();
  CHECK(bad.load() == 0);
  CHECK(src.shards_opened() == shard_count);
  CHECK(fds_under(fs::canonical(dir.path())) == shard_count);
}

namespace {
// Fixed-layout shards (20 rows of 10 int32; row r of shard k holds k * 1000 + r * 10 + j), no
// labels, with pack's manifest; shard `bad` replaced by text.
std::vector<fs::path> write_fixed_shards(const fs::path& dir, int count, int bad) {
  detail::pack::manifest_data m;
  m.format = "hdf5";
  std::vector<fs::path> paths;
  for (int k = 0; k < count; ++k) {
    paths.push_back(shard_path(dir, k));
    std::vector<std::int32_t> v(200);
    for (int j = 0; j < 200; ++j) v[static_cast<std::size_t>(j)] = k * 1000 + j;
    {
      h5_file f(paths.back());
      dataset_spec s;
      s.file_type = H5T_STD_I32LE;
      s.mem_type = H5T_NATIVE_INT32;
      s.dims = {20, 10};
      f.add(s, v);
    }
    detail::pack::manifest_shard e;
    e.file = paths.back().filename().string();
    e.records = 20;
    e.max_record = 40;
    m.shards.push_back(e);
  }
  std::ofstream(dir / "manifest.json") << detail::pack::manifest_text(m);
  std::ofstream(paths[static_cast<std::size_t>(bad)], std::ios::trunc) << "not HDF5\n";
  return paths;
}
}  // namespace

TEST_CASE("a loader over lazily opened shards: a bad shard is the batch's typed error, or skipped") {
  // Sequential order asks the source for decode units while planning (before any read): a shard
  // that fails to open there must not escape the planner thread.
  test::temp_dir dir("lazyloader");
  const auto paths = write_fixed_shards(dir.path(), 4, 2);
  hdf5_source src(paths);
  REQUIRE(src.size() == 80);
  loader_config c;
  c.batch_size = 40;  // several tasks per batch: the planner asks for decode units
  c.order = sample_order::sequential;
  c.part = partition{};
  c.epochs = 1;
  c.workers = 4;
  c.prefetch = 2;  // 4 tasks per batch
  c.on_error = error_policy::skip;
  {
    loader<hdf5_source> l(src, c);
    std::vector<std::uint64_t> seen;
    std::uint64_t skipped_named = 0;
    for (auto& b : l.epoch()) {
      for (std::size_t k = 0; k < b.size(); ++k) {
        const auto i = b.indices()[k];
        std::int32_t first = 0;
        std::memcpy(&first, b.record(k).data(), 4);
        CHECK(first == static_cast<std::int32_t>((i / 20) * 1000 + (i % 20) * 10));
        seen.push_back(i);
      }
      for (const auto& s : b.skipped())
        skipped_named += s.what.find(paths[2].string()) != std::string::npos ? 1 : 0;
    }
    CHECK(seen.size() == 60);  // shards 0, 1 and 3
    for (const auto i : seen) CHECK(i / 20 != 2);
    CHECK(skipped_named == 20);
  }
  c.on_error = error_policy::throw_error;
  loader<hdf5_source> l(src, c);
  bool thrown = false;
  try {
    for (auto& b : l.epoch()) (void)b;
  } catch (const format_error& e) {
    thrown = true;
    CHECK(e.file() == paths[2].string());
  }
  CHECK(thrown);
}
