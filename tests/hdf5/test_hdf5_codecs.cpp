// The plugin codecs and deflate, decoded by gpufeed's workers: files written by h5py with each
// filter (make_codec_fixtures.py; Zstd 32015 from zstd frames written with H5Dwrite_chunk) read
// on the fast path with bytes equal to h5py's own read, through a reader and through the loader
// in both orders, and damaged chunks give corrupt_error naming the shard and the record.
#include <doctest/doctest.h>

#include <hdf5.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <numeric>
#include <string>
#include <vector>

#include "gpufeed/hdf5_source.hpp"
#include "gpufeed/loader.hpp"
#include "chunk_rewrite.hpp"
#include "codec_fixtures.hpp"
#include "h5_writer.hpp"
#include "hdf5_test_util.hpp"
#include "test_util.hpp"

using namespace gpufeed;
namespace fs = std::filesystem;

using gpufeed::test::rewrite_filtered_chunk;

namespace {

// The fixtures, written once per run by the Python generator; exits 77 (skipped) with the
// generator's message when h5py or a plugin package is missing.
const fs::path& fixtures() {
  static gpufeed::test::temp_dir dir("h5codec");
  static const bool made = gpufeed::test::make_codec_fixtures(
      dir.path(), "", "test_hdf5_codecs: skipped (install the packages above: scripts/setup.sh)");
  (void)made;
  return dir.path();
}

std::vector<std::string> fixture_names() { return gpufeed::test::fixture_names(fixtures()); }

std::vector<std::vector<std::byte>> expected_rows(const std::string& name) {
  return gpufeed::test::fixture_rows(fixtures(), name);
}
std::vector<std::vector<std::byte>> expected_rows(const std::string& name, std::size_t row) {
  return gpufeed::test::fixture_rows(fixtures(), name, row);
}

// One epoch through the loader: every record exactly once, each with h5py's bytes.
void check_epoch(const hdf5_source& src, const std::vector<std::vector<std::byte>>& want,
                 sample_order order) {
  loader_config c;
  c.batch_size = 7;
  c.order = order;
  c.workers = 3;
  c.prefetch = 4;
  c.epochs = 1;
  loader<hdf5_source> l(src, c);
  std::vector<std::uint64_t> seen;
  std::size_t bad = 0;
  while (auto b = l.next()) {
    for (std::size_t k = 0; k < b->size(); ++k) {
      const auto i = b->indices()[k];
      REQUIRE(i < want.size());
      const auto got = b->record(k);
      if (got.size() != want[i].size() || !std::equal(want[i].begin(), want[i].end(), got.begin()))
        ++bad;
      seen.push_back(i);
    }
  }
  CHECK(bad == 0);
  std::sort(seen.begin(), seen.end());
  std::vector<std::uint64_t> all(want.size());
  std::iota(all.begin(), all.end(), 0);
  CHECK(seen == all);
}

// Where a flipped byte is certain to be caught: a size field of the codec's header, or anywhere
// under a checksum. Bitshuffle without compression has neither (HDF5 cannot tell either).
long header_byte(const std::string& name) {
  if (name.starts_with("gzip") || name.starts_with("lz4_fletcher32")) return -2;  // middle
  if (name.starts_with("blosc")) return 4;      // nbytes, little-endian at 4
  if (name.starts_with("zstd")) return 0;       // the frame's magic number
  if (name.starts_with("bitshuffle_none")) return -1;
  return 7;  // lz4 and bitshuffle-lz4/zstd: low byte of the 8-byte big-endian total size
}

void check_corrupt(const fs::path& path, std::uint64_t record, const std::string& what) {
  hdf5_source src(path);
  REQUIRE(src.shards()[0].read_path == hdf5_read_path::pread_decode);
  std::vector<std::byte> buf(src.max_record_size());
  auto r = src.make_reader();
  try {
    r.read(record, buf);
    FAIL_CHECK(what << ": no error for record " << record << " of " << path);
  } catch (const corrupt_error& e) {
    CHECK(e.file() == path.string());
    CHECK(e.record() == record);
  }
}

}  // namespace

TEST_CASE("each codec: the fast path, bytes equal to h5py's read") {
  for (const auto& name : fixture_names()) {
    CAPTURE(name);
    hdf5_source src(fixtures() / (name + ".h5"));
    const auto& info = src.shards()[0];
    CHECK(info.read_path == hdf5_read_path::pread_decode);
    CHECK(info.fallback_reason.empty());
    const auto want = expected_rows(name);
    CHECK(gpufeed::test::count_mismatches(src, want) == 0);
  }
}

TEST_CASE("each codec through the loader: shuffled and sequential, every record once") {
  for (const auto& name : fixture_names()) {
    CAPTURE(name);
    hdf5_source src(fixtures() / (name + ".h5"));
    const auto want = expected_rows(name);
    check_epoch(src, want, sample_order::sequential);
    check_epoch(src, want, sample_order::shuffled);
  }
}

TEST_CASE("each codec: flipped and truncated chunks give corrupt_error naming shard and record") {
  gpufeed::test::temp_dir dir("h5codec-bad");
  for (const auto& name : fixture_names()) {
    CAPTURE(name);
    const fs::path good = fixtures() / (name + ".h5");
    const fs::path cut = dir / (name + "-cut.h5");
    fs::copy_file(good, cut);
    const auto at_cut =
        rewrite_filtered_chunk(cut, [](std::vector<unsigned char>& b) { b.resize(b.size() / 2); });
    check_corrupt(cut, at_cut, "truncated");
    if (const long at = header_byte(name); at != -1) {
      const fs::path flip = dir / (name + "-flip.h5");
      fs::copy_file(good, flip);
      const auto at_flip = rewrite_filtered_chunk(flip, [at](std::vector<unsigned char>& b) {
        b[at >= 0 ? static_cast<std::size_t>(at) : b.size() / 2] ^= 0x5a;
      });
      check_corrupt(flip, at_flip, "flipped");
    }
  }
}

TEST_CASE("each codec: random damage to a chunk gives its bytes or corrupt_error, nothing else") {
  // Codecs without a checksum may decode a flipped literal to other bytes, as HDF5 would; what
  // must never happen is a crash, a read outside the buffers (ASan runs this) or another error.
  gpufeed::test::temp_dir dir("h5codec-rand");
  std::uint64_t x = 0x9e3779b97f4a7c15ull;
  auto next = [&x] {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return x;
  };
  std::size_t caught = 0, tries = 0;
  for (const auto& name : fixture_names()) {
    CAPTURE(name);
    for (int round = 0; round < 6; ++round) {
      const fs::path bad = dir / (name + "-" + std::to_string(round) + ".h5");
      fs::copy_file(fixtures() / (name + ".h5"), bad);
      const auto first = rewrite_filtered_chunk(bad, [&](std::vector<unsigned char>& b) {
        for (int k = 0; k < 1 + round; ++k) b[next() % b.size()] ^= static_cast<unsigned char>(1 + next() % 255);
        if (round == 5) b.resize(next() % b.size());  // and cut
      });
      hdf5_source src(bad);
      std::vector<std::byte> buf(src.max_record_size());
      auto r = src.make_reader();
      ++tries;
      try {
        r.read(first, buf);
      } catch (const corrupt_error& e) {
        ++caught;
        CHECK(e.record() == first);
      }
    }
  }
  MESSAGE(caught << " of " << tries << " damaged chunks detected");
  CHECK(caught > 0);
}

TEST_CASE("Bitshuffle Zstd mode written through the installed plugin: h5py's bytes") {
  // Debian's plugin stores these chunks uncompressed (same size as the data) under compression
  // code 3, and reads them back so; gpufeed refused them ("header says 0 bytes").
  const fs::path path = fixtures() / "bitshuffle_zstd_plugin.h5";
  hdf5_source src(path);
  CHECK(src.shards()[0].read_path == hdf5_read_path::pread_decode);
  const auto want = expected_rows("bitshuffle_zstd_plugin", 37 * 4);
  REQUIRE(src.size() == want.size());
  auto r = src.make_reader();
  std::vector<std::byte> got(37 * 4);
  std::size_t bad = 0;
  for (std::uint64_t i = 0; i < src.size(); ++i) {
    r.read(i, got);
    bad += got != want[i];
  }
  CHECK(bad == 0);
}

TEST_CASE("Blosc chunks with bytes after the Blosc buffer: read as h5py reads them") {
  gpufeed::test::temp_dir dir("h5codec-blosc-tail");
  for (const auto& name : fixture_names()) {
    if (!name.starts_with("blosc")) continue;
    CAPTURE(name);
    const fs::path path = dir / (name + ".h5");
    fs::copy_file(fixtures() / (name + ".h5"), path);
    const auto first = rewrite_filtered_chunk(
        path, [](std::vector<unsigned char>& b) { b.insert(b.end(), 37, 0xab); });
    hdf5_source src(path);
    const auto want = expected_rows(name);
    std::vector<std::byte> got(gpufeed::test::fixture_row_bytes(name));
    src.make_reader().read(first, got);
    CHECK(got == want[first]);
  }
}

TEST_CASE("filter names and parameters are reported") {
  CHECK(hdf5_source(fixtures() / "bitshuffle_zstd_span.h5").shards()[0].filters ==
        std::vector<std::string>{"bitshuffle(zstd)"});
  CHECK(hdf5_source(fixtures() / "lz4_rows.h5").shards()[0].filters ==
        std::vector<std::string>{"lz4"});
  CHECK(hdf5_source(fixtures() / "zstd_rows.h5").shards()[0].filters ==
        std::vector<std::string>{"zstd"});
  CHECK(hdf5_source(fixtures() / "blosc_lz4_shuffle_rows.h5").shards()[0].filters ==
        std::vector<std::string>{"blosc"});
}

// Run alone (its own ctest entry), before anything in the process initialises HDF5: HDF5 reads
// HDF5_PLUGIN_PATH once, and the path then replaces the default plugin directory.
TEST_CASE("a filter whose plugin is found only through HDF5_PLUGIN_PATH reads through H5Dread" *
          doctest::skip(std::getenv("GPUFEED_TEST_PLUGIN_PATH_CASE") == nullptr)) {
  const fs::path& fx = fixtures();
  fs::path plugin;  // the LZF plugin (Debian's bitshuffle package), copied to a private directory
  for (const auto& lib : fs::directory_iterator("/usr/lib"))
    if (fs::exists(lib.path() / "hdf5/serial/plugins/libh5LZF.so"))
      plugin = lib.path() / "hdf5/serial/plugins/libh5LZF.so";
  REQUIRE_MESSAGE(!plugin.empty(), "libh5LZF.so not found (Debian package bitshuffle)");
  gpufeed::test::temp_dir dir("h5plugins");
  fs::copy_file(plugin, dir / "libh5LZF.so");
  REQUIRE(setenv("HDF5_PLUGIN_PATH", dir.path().c_str(), 1) == 0);

  hdf5_source src(fx / "lzf.h5");
  unsigned entries = 0;
  REQUIRE(H5PLsize(&entries) >= 0);
  REQUIRE(entries == 1);  // the default directory is no longer searched
  std::vector<char> first(4096);
  REQUIRE(H5PLget(0, first.data(), first.size()) > 0);
  CHECK(fs::path(first.data()) == dir.path());
  const auto& info = src.shards()[0];
  CHECK(info.read_path == hdf5_read_path::h5dread_fallback);
  CHECK(info.fallback_reason.find("lzf") != std::string::npos);
  CHECK(info.fallback_reason.find("plugin missing") == std::string::npos);
  CHECK(gpufeed::test::count_mismatches(src, expected_rows("lzf", 64 * 4)) == 0);
}
