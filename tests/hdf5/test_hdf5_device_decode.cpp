// The loader's device decode path (docs/design.md, "GPU decode in the loader") end to end on the
// host: a transfer engine whose unit_decoder runs the GPU kernels' host emulation
// (support/emulated_decode_engine.hpp) stands in for the GPU. On every h5py-written codec fixture
// and in every order, every record arrives exactly once with h5py's bytes; units are staged once
// per use of the device cache, not once per record; a unit the device fails to decode, and a
// corrupt chunk, are read again on the host, where the error policy gives exactly what the host
// path gives; and loader_config::decode says where it cannot decode on the device.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "gpufeed/hdf5_source.hpp"
#include "gpufeed/loader.hpp"
#include "chunk_rewrite.hpp"
#include "codec_fixtures.hpp"
#include "emulated_decode_engine.hpp"
#include "h5_writer.hpp"
#include "test_util.hpp"

using namespace gpufeed;
namespace fs = std::filesystem;

namespace {

const fs::path& fixtures() {
  static gpufeed::test::temp_dir dir("h5devdec");
  static const bool made = gpufeed::test::make_codec_fixtures(
      dir.path(), "", "test_hdf5_device_decode: skipped (install the packages: scripts/setup.sh)");
  (void)made;
  return dir.path();
}

std::vector<std::string> fixture_names() { return gpufeed::test::fixture_names(fixtures()); }

// The codecs whose every filter has a device decoder.
bool device_codec(const std::string& name) {
  return !name.starts_with("blosc") && !name.starts_with("zstd") &&
         !name.starts_with("bitshuffle_zstd");
}

std::vector<std::vector<std::byte>> expected_rows(const std::string& name) {
  return gpufeed::test::fixture_rows(fixtures(), name);
}

// A target whose engine is the emulated device; `made` sees the engine it built.
target emulated(std::function<void(gpufeed::test::emulated_decode_engine&)> setup = {}) {
  return target(
      [setup] {
        auto e = std::make_unique<gpufeed::test::emulated_decode_engine>();
        if (setup) setup(*e);
        return e;
      },
      0, "emulated");
}

loader_config config(sample_order order, target t) {
  loader_config c;
  c.batch_size = 7;
  c.order = order;
  c.workers = 3;
  c.prefetch = 4;
  c.epochs = 1;
  c.target = std::move(t);
  return c;
}

struct epoch_result {
  std::vector<std::uint64_t> seen;
  std::size_t bad = 0;
  loader_stats stats;
};

epoch_result run(const hdf5_source& src, const std::vector<std::vector<std::byte>>& want,
                 loader_config c) {
  loader<hdf5_source> l(src, std::move(c));
  epoch_result r;
  while (auto b = l.next())
    for (std::size_t k = 0; k < b->size(); ++k) {
      const auto i = b->indices()[k];
      REQUIRE(i < want.size());
      const auto got = b->record(k);
      if (got.size() != want[i].size() || !std::equal(want[i].begin(), want[i].end(), got.begin()))
        ++r.bad;
      r.seen.push_back(i);
    }
  r.stats = l.stats();
  return r;
}

void check_exactly_once(std::vector<std::uint64_t> seen, std::size_t n) {
  std::sort(seen.begin(), seen.end());
  std::vector<std::uint64_t> all(n);
  std::iota(all.begin(), all.end(), 0);
  CHECK(seen == all);
}

const sample_order orders[] = {sample_order::sequential, sample_order::shuffled,
                               sample_order::block_shuffled};

}  // namespace

TEST_CASE("every codec fixture, every order: h5py's bytes, each record once, decoded there") {
  for (const auto& name : fixture_names()) {
    CAPTURE(name);
    hdf5_source src(fixtures() / (name + ".h5"));
    const auto want = expected_rows(name);
    CHECK((src.device_units().place_bytes > 0) == device_codec(name));
    for (const sample_order order : orders) {
      const std::string order_name = to_string(order);
      CAPTURE(order_name);
      const epoch_result r = run(src, want, config(order, emulated()));
      CHECK(r.bad == 0);
      check_exactly_once(r.seen, want.size());
      const device_decode_stats& d = r.stats.device_decode;
      CHECK(d.on == device_codec(name));
      if (!d.on) continue;
      CHECK(d.units_staged > 0);
      CHECK(d.device.units > 0);
      CHECK(d.device.gathered_bytes > 0);
      CHECK(d.batches_redone == 0);
      CHECK(d.no_room == 0);
      CHECK(d.peak_places <= d.cache_places);
      REQUIRE(r.stats.decode);
      CHECK(r.stats.decode->chunks_decoded == 0);  // nothing decoded on the host, nor ahead
    }
  }
}

TEST_CASE("decoding on the device deepens an automatic prefetch; a prefetch set stays") {
  const std::string name = "lz4_rows";
  hdf5_source src(fixtures() / (name + ".h5"));
  REQUIRE(src.device_units().place_bytes > 0);
  const auto want = expected_rows(name);
  for (const std::size_t set : {std::size_t{0}, std::size_t{3}}) {
    CAPTURE(set);
    loader_config c = config(sample_order::block_shuffled, emulated());
    c.prefetch = set;
    const epoch_result r = run(src, want, c);
    CHECK(r.bad == 0);
    check_exactly_once(r.seen, want.size());
    CHECK(r.stats.device_decode.on);
    CHECK(r.stats.prefetch == (set == 0 ? 16u : set));
  }
  loader_config host = config(sample_order::block_shuffled, emulated());
  host.prefetch = 0;
  host.decode = decode_site::host;  // decoding on the host: the GPU target's automatic depth
  const epoch_result h = run(src, want, host);
  CHECK_FALSE(h.stats.device_decode.on);
  CHECK(h.stats.prefetch <= 8u);
}

TEST_CASE("sequential order stages each band about once: decoded units are reused by batches") {
  for (const std::string name : {"lz4_rows", "gzip_span", "bitshuffle_lz4_odd"}) {
    CAPTURE(name);
    hdf5_source src(fixtures() / (name + ".h5"));
    const auto want = expected_rows(name);
    const epoch_result r = run(src, want, config(sample_order::sequential, emulated()));
    CHECK(r.bad == 0);
    const std::uint64_t bands =
        (want.size() + src.device_units().unit_records - 1) / src.device_units().unit_records;
    const std::uint64_t batches = (want.size() + 6) / 7;
    // A band is staged again only when a later batch's worker reached it first (in_order).
    CHECK(r.stats.device_decode.units_staged >= bands);
    CHECK(r.stats.device_decode.units_staged <= bands + batches);
  }
}

TEST_CASE("sequential order stages bands ahead: one launch decodes the bands of many batches") {
  for (const std::string name : {"lz4_rows", "gzip_span", "bitshuffle_lz4_odd"}) {
    CAPTURE(name);
    hdf5_source src(fixtures() / (name + ".h5"));
    const auto want = expected_rows(name);
    loader_config c = config(sample_order::sequential, emulated());
    c.workers = 1;  // batches staged in order: no later batch reaches a band first
    const epoch_result r = run(src, want, std::move(c));
    CHECK(r.bad == 0);
    check_exactly_once(r.seen, want.size());
    const std::uint64_t per = src.device_units().unit_records;
    const std::uint64_t bands = (want.size() + per - 1) / per;
    const device_decode_stats& d = r.stats.device_decode;
    CAPTURE(bands);
    CAPTURE(d.stage_ahead);
    REQUIRE(bands >= 4);
    REQUIRE(d.stage_ahead >= 1);
    // Each band staged once; a launch at every band a batch must stage, which brings the next
    // stage_ahead bands with it.
    CHECK(d.units_staged == bands);
    CHECK(d.device.launches == (bands + d.stage_ahead) / (d.stage_ahead + 1));
    CHECK(d.units_staged_ahead == bands - d.device.launches);
  }
}

namespace {

// 8 MB of shuffle + deflate chunks of 50 rows of 1000 bytes: block_shuffled's units are 1 MiB
// storage blocks (about 20 bands each).
struct window_file {
  static constexpr std::size_t rows = 8000, row = 1000;
  gpufeed::test::temp_dir dir{"h5devwin"};
  fs::path file = dir.path() / "rows.h5";
  std::vector<std::vector<std::byte>> want;

  window_file() {
    const auto data = gpufeed::test::pattern<std::uint8_t>(rows * row, 7);
    {
      gpufeed::test::h5_file f(file);
      gpufeed::test::dataset_spec d;
      d.dims = {rows, row};
      d.chunk = {50, row};
      d.shuffle = true;
      d.deflate = 4;
      f.add(d, data);
    }
    want.resize(rows);
    for (std::size_t i = 0; i < rows; ++i) {
      const auto* p = reinterpret_cast<const std::byte*>(data.data() + i * row);
      want[i].assign(p, p + row);
    }
  }
};

}  // namespace

TEST_CASE("block_shuffled stages the next window with each window's batches, each unit once") {
  // Windows of 2 units.
  const window_file w;
  const auto& want = w.want;
  const hdf5_source src(w.file);
  constexpr std::size_t rows = window_file::rows;
  const std::uint64_t bands = rows / 50;
  for (const std::size_t workers : {1, 3}) {
    for (const bool ahead : {true, false}) {
      CAPTURE(workers);
      CAPTURE(ahead);
      loader_config c = config(sample_order::block_shuffled, emulated());
      c.batch_size = 64;
      c.workers = workers;
      c.shuffle_window = 2;
      c.decode_ahead = ahead;
      const epoch_result r = run(src, want, std::move(c));
      CHECK(r.bad == 0);
      check_exactly_once(r.seen, want.size());
      const device_decode_stats& d = r.stats.device_decode;
      CAPTURE(d.units_staged);
      CAPTURE(d.units_staged_ahead);
      REQUIRE(r.stats.order_units >= 6);
      CHECK(d.batches_redone == 0);
      CHECK(d.no_room == 0);
      if (!ahead) CHECK(d.units_staged_ahead == 0);
      // With one worker, tasks run in the order the planner made them, so the counts are exact;
      // with three, how much of a window its predecessor stages first depends on scheduling.
      if (workers == 1) {
        CHECK(d.units_staged == bands);  // each band decoded once in the epoch
        if (ahead)  // every window but the first is staged a window early
          CHECK(d.units_staged_ahead * r.stats.order_units >= bands * (r.stats.order_units - 3));
      }
    }
  }
}

TEST_CASE("block_shuffled in a device cache smaller than three windows: nothing staged ahead") {
  // Windows of 2 storage blocks hold about 40 bands; an 8 MiB cache (about 80 places of 100 KB)
  // holds a window and the batches in flight, not the three windows staging ahead needs.
  const window_file w;
  const auto& want = w.want;
  const hdf5_source src(w.file);
  constexpr std::size_t rows = window_file::rows;
  loader_config c = config(sample_order::block_shuffled, emulated());
  c.batch_size = 64;
  c.workers = 1;
  c.shuffle_window = 2;
  c.device_cache_bytes = 8 << 20;
  const epoch_result r = run(src, want, std::move(c));
  CHECK(r.bad == 0);
  check_exactly_once(r.seen, want.size());
  const device_decode_stats& d = r.stats.device_decode;
  CAPTURE(d.cache_places);
  CAPTURE(d.units_staged);
  CHECK(d.cache_places < 3 * 40);
  CHECK(d.units_staged_ahead == 0);
  CHECK(d.units_staged == rows / 50);  // each band still decoded once
  CHECK(d.no_room == 0);
  CHECK(d.batches_redone == 0);
}

TEST_CASE("units the device fails to decode: their batches are read again on the host") {
  for (const std::string name : {"lz4_rows", "gzip_span", "bitshuffle_none_rows"}) {
    CAPTURE(name);
    hdf5_source src(fixtures() / (name + ".h5"));
    const auto want = expected_rows(name);
    for (const sample_order order : orders) {
      const std::string order_name = to_string(order);
      CAPTURE(order_name);
      auto t = emulated([](gpufeed::test::emulated_decode_engine& e) {
        e.fail_units([](std::uint64_t n) { return n % 5 == 2; });
      });
      const epoch_result r = run(src, want, config(order, t));
      CHECK(r.bad == 0);
      check_exactly_once(r.seen, want.size());
      CHECK(r.stats.device_decode.batches_redone > 0);
    }
  }
}

TEST_CASE("a corrupt chunk: the same records delivered and skipped as on the host path") {
  gpufeed::test::temp_dir dir("h5devdec-bad");
  for (const std::string name : {"lz4_rows", "gzip_rows", "bitshuffle_lz4_span"}) {
    CAPTURE(name);
    const fs::path bad = dir / (name + ".h5");
    fs::copy_file(fixtures() / (name + ".h5"), bad);
    // LZ4 and deflate: a byte in the middle of the chunk's payload, so the framing stands (the
    // host plans it) and the decode fails on the device (the LZ4 sequence or the Huffman code
    // breaks, or a checksum differs). Bitshuffle: the chunk cut, which its framing refuses.
    const bool cut = name.starts_with("bitshuffle");
    const std::uint64_t first =
        gpufeed::test::rewrite_filtered_chunk(bad, [cut](std::vector<unsigned char>& b) {
          if (cut)
            b.resize(b.size() / 2);
          else
            b[b.size() / 2] ^= 0xff;
        });
    hdf5_source src(bad);
    const auto want = expected_rows(name);
    for (const sample_order order : orders) {
      const std::string order_name = to_string(order);
      CAPTURE(order_name);
      loader_config host = config(order, emulated());
      host.decode = decode_site::host;
      host.on_error = error_policy::skip;
      loader_config device = host;
      device.decode = decode_site::device;
      std::vector<std::uint64_t> skipped[2], seen[2];
      for (int k = 0; k < 2; ++k) {
        loader<hdf5_source> l(src, k == 0 ? host : device);
        while (auto b = l.next()) {
          for (const auto& s : b->skipped()) skipped[k].push_back(s.index);
          for (std::size_t j = 0; j < b->size(); ++j) {
            const auto i = b->indices()[j];
            const auto got = b->record(j);
            CHECK(std::equal(want[i].begin(), want[i].end(), got.begin(), got.end()));
            seen[k].push_back(i);
          }
        }
        CHECK(l.stats().device_decode.on == (k == 1));
      }
      CHECK(skipped[0].size() > 0);
      CHECK(skipped[0] == skipped[1]);
      CHECK(seen[0] == seen[1]);
      // throw_error: the batch's error names the shard and the first damaged record.
      device.on_error = error_policy::throw_error;
      device.order = sample_order::sequential;
      loader<hdf5_source> l(src, device);
      bool thrown = false;
      try {
        while (auto b = l.next()) {
        }
      } catch (const corrupt_error& e) {
        thrown = true;
        CHECK(e.file() == bad.string());
        CHECK(e.record() == first);
      }
      CHECK(thrown);
    }
  }
}

TEST_CASE("a device cache too small for every batch: records beyond its room read on the host") {
  const std::string name = "lz4_rows";
  hdf5_source src(fixtures() / (name + ".h5"));
  const auto want = expected_rows(name);
  for (const sample_order order : orders) {
    const std::string order_name = to_string(order);
    CAPTURE(order_name);
    loader_config c = config(order, emulated());
    c.device_cache_bytes = 8 * src.device_units().place_bytes;
    const epoch_result r = run(src, want, c);
    CHECK(r.bad == 0);
    check_exactly_once(r.seen, want.size());
    CHECK(r.stats.device_decode.cache_places <= 8);
  }
}

TEST_CASE("decode = device where it cannot be: a config_error saying why") {
  hdf5_source lz4(fixtures() / "lz4_rows.h5");
  hdf5_source blosc(fixtures() / "blosc_lz4_shuffle_rows.h5");
  loader_config c = config(sample_order::sequential, target::host());
  c.decode = decode_site::device;
  CHECK_THROWS_AS(loader<hdf5_source>(lz4, c), config_error);
  c.target = emulated();
  CHECK_THROWS_AS(loader<hdf5_source>(blosc, c), config_error);
  c.decode = decode_site::automatic;
  loader<hdf5_source> l(blosc, c);
  CHECK_FALSE(l.stats().device_decode.on);
}
