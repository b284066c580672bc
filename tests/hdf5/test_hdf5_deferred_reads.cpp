// Deferred reads: hdf5_source::reader::try_read() never waits for a chunk another reader is
// decoding; it leaves the record for finish_deferred(). On h5py-written LZ4 rows (one chunk per
// record) and gzip rows spanning 16 chunks (make_codec_fixtures.py, scale 6), with one reader's
// decode held up by the decode observation point: the other reader's try_read of a record in
// the held chunk returns false having decoded the record's other chunks (and the next one of
// that chunk at once, deferred whole), a record elsewhere reads at once, finish_deferred() completes the deferred one with h5py's bytes, every chunk is
// decoded once, and a damaged held chunk gives each reader corrupt_error naming its own record.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "chunk_rewrite.hpp"
#include "codec_fixtures.hpp"
#include "decode_counter.hpp"
#include "gpufeed/hdf5_source.hpp"
#include "test_util.hpp"

using namespace gpufeed;
namespace fs = std::filesystem;
using gpufeed::test::decode_counter;

namespace {

const fs::path& fixtures() {
  static gpufeed::test::temp_dir dir("h5late");
  static const bool made = gpufeed::test::make_codec_fixtures(
      dir.path(), " 6 > /dev/null",
      "test_hdf5_deferred_reads: skipped (install the fixture writers: scripts/setup.sh)");
  (void)made;
  return dir.path();
}

std::vector<std::byte> expected(const std::string& name) {
  return gpufeed::test::fixture_bytes(fixtures(), name);
}

// The first chunk decode after arm() stalls until release() (or 10 s); every decode is counted
// per chunk (file, address) as decode_counter does.
struct held_decode {
  static inline std::mutex mutex;
  static inline std::condition_variable cv;
  static inline bool armed = false, entered = false, released = false;
  static inline decode_counter::counts counts;

  static void observe(const detail::hdf5::shard_index& s, const detail::hdf5::chunk_entry& c) noexcept {
    std::unique_lock lock(mutex);
    ++counts[{s.path, c.address}];
    if (!armed) return;
    armed = false;
    entered = true;
    cv.notify_all();
    cv.wait_for(lock, std::chrono::seconds(10), [] { return released; });
  }
  static void arm() {
    std::lock_guard lock(mutex);
    armed = true;
    entered = released = false;
    counts.clear();
    detail::hdf5::chunk_decode_observer.store(&observe);
  }
  static void wait_entered() {
    std::unique_lock lock(mutex);
    REQUIRE(cv.wait_for(lock, std::chrono::seconds(10), [] { return entered; }));
  }
  static void release() {
    std::lock_guard lock(mutex);
    released = true;
    cv.notify_all();
  }
  static decode_counter::counts done() {
    detail::hdf5::chunk_decode_observer.store(nullptr);
    std::lock_guard lock(mutex);
    return counts;
  }
};

bool same(const std::vector<std::byte>& got, const std::vector<std::byte>& want, std::uint64_t row) {
  return std::equal(got.begin(), got.end(), want.begin() + static_cast<std::ptrdiff_t>(row * got.size()));
}

}  // namespace

TEST_CASE("one chunk per record: a record in a chunk being decoded is deferred, then finished") {
  // lz4_rows: 64 float32 per row, chunks of 50 rows. Reader A decodes chunk 0 (held); reader B
  // defers rows 1 and 2, reads row 60 (chunk 1) at once, and finishes rows 1 and 2 once A's
  // decode is done.
  const std::size_t row = 64 * 4;
  const auto want = expected("lz4_rows");
  hdf5_source src(fixtures() / "lz4_rows.h5");
  std::vector<std::byte> a(row), b1(row), b2(row), b60(row);
  auto b = src.make_reader();
  held_decode::arm();
  std::jthread first([&] { src.make_reader().read(0, a); });
  held_decode::wait_entered();
  CHECK_FALSE(b.try_read(1, b1));
  CHECK_FALSE(b.try_read(2, b2));  // the same chunk: deferred whole
  CHECK_THROWS_AS(b.finish_deferred(2, b2), std::logic_error);  // not the oldest deferred record
  CHECK(b.try_read(60, b60));
  CHECK(same(b60, want, 60));
  held_decode::release();
  first.join();
  b.finish_deferred(1, b1);
  b.finish_deferred(2, b2);
  CHECK(same(a, want, 0));
  CHECK(same(b1, want, 1));
  CHECK(same(b2, want, 2));
  const auto counts = held_decode::done();
  CHECK(counts.size() == 2);  // chunks 0 and 1, each decoded once
  for (const auto& [chunk, n] : counts) CHECK(n == 1);
  const decode_stats ds = src.decode_stats();
  CHECK(ds.records == 4);
  CHECK(ds.chunks_decoded == 2);
}

TEST_CASE("a record over 16 chunks: the deferred one decodes the other 15, waits for one") {
  // gzip_span: a row of 2048 float32 spans a band of 16 chunks of 8 x 128. A holds the band's
  // first decode; B's try_read(1) decodes the other 15 and defers; B reads row 8 (band 1) at
  // once; finish_deferred(1) copies the last chunk once A is done.
  const std::size_t row = 2048 * 4;
  const auto want = expected("gzip_span");
  hdf5_source src(fixtures() / "gzip_span.h5");
  std::vector<std::byte> a(row), b1(row), b8(row);
  auto b = src.make_reader();
  held_decode::arm();
  std::jthread first([&] { src.make_reader().read(0, a); });
  held_decode::wait_entered();
  CHECK_FALSE(b.try_read(1, b1));
  {
    std::lock_guard lock(held_decode::mutex);
    CHECK(held_decode::counts.size() == 16);  // the held chunk and the 15 B decoded
  }
  CHECK(b.try_read(8, b8));
  CHECK(same(b8, want, 8));
  held_decode::release();
  first.join();
  b.finish_deferred(1, b1);
  CHECK(same(a, want, 0));
  CHECK(same(b1, want, 1));
  const auto counts = held_decode::done();
  CHECK(counts.size() == 32);  // bands 0 and 1, each chunk decoded once
  for (const auto& [chunk, n] : counts) CHECK(n == 1);
}

TEST_CASE("a deferred record of a damaged chunk: corrupt_error naming its own record") {
  gpufeed::test::temp_dir dir("h5late-bad");
  for (const auto& name : {std::string("lz4_rows"), std::string("gzip_span")}) {
    CAPTURE(name);
    const std::size_t row = name == "lz4_rows" ? 64 * 4 : 2048 * 4;
    const fs::path bad = dir / (name + ".h5");
    fs::copy_file(fixtures() / (name + ".h5"), bad);
    const std::uint64_t first = gpufeed::test::rewrite_filtered_chunk(
        bad, [](std::vector<unsigned char>& bytes) { bytes.resize(bytes.size() / 2); });
    hdf5_source src(bad);
    std::vector<std::byte> a(row), b1(row);
    auto b = src.make_reader();
    bool a_right = false;
    held_decode::arm();
    std::jthread reader_a([&] {
      try {
        src.make_reader().read(first, a);
      } catch (const corrupt_error& e) {
        a_right = e.file() == bad.string() && e.record() == first;
      }
    });
    held_decode::wait_entered();
    const bool done = b.try_read(first + 1, b1);
    held_decode::release();
    reader_a.join();
    held_decode::done();
    CHECK(a_right);
    REQUIRE_FALSE(done);  // A held the damaged chunk: B left its record
    try {
      b.finish_deferred(first + 1, b1);
      FAIL("a damaged chunk was read without an error");
    } catch (const corrupt_error& e) {
      CHECK(e.file() == bad.string());
      CHECK(e.record() == first + 1);
    }
    std::vector<std::byte> later(row);  // the reader reads on after the error
    CHECK_NOTHROW(b.read(first + (name == "lz4_rows" ? 50 : 8), later));
  }
}
