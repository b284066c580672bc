// pack() read back through hdf5_source / lmdb_source: every record byte for byte, labels, names,
// manifest; determinism across thread counts; verify; option checks.
#include <doctest/doctest.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "gpufeed/hdf5_source.hpp"
#include "gpufeed/lmdb_source.hpp"
#include "gpufeed/pack/hdf5_extras.hpp"
#include "gpufeed/pack/pack.hpp"
#include "h5_writer.hpp"
#include "pack_test_util.hpp"
#include "test_util.hpp"

using namespace gpufeed;
namespace fs = std::filesystem;
using gpufeed::test::bytes;
using gpufeed::test::read_file;

namespace {

std::vector<bytes> originals(const std::vector<pack_input>& in) {
  std::vector<bytes> v;
  for (const auto& i : in) v.push_back(read_file(i.path));
  return v;
}

// What the pack's records should be: the inputs in the pack's order (shuffled by default).
template <class T>
std::vector<T> in_pack_order(const pack_result& r, const std::vector<T>& given) {
  REQUIRE(r.input_of.size() == given.size());
  std::vector<T> v;
  for (const std::uint64_t i : r.input_of) v.push_back(given[static_cast<std::size_t>(i)]);
  return v;
}

// The manifest agrees with the result and with the original files (given in input order).
void check_manifest(const pack_result& r, const std::vector<bytes>& given,
                    const std::vector<std::string>& label_names) {
  const auto want = in_pack_order(r, given);
  const auto m = nlohmann::json::parse(gpufeed::test::read_text(r.manifest));
  CHECK(m["kind"] == "gpufeed pack manifest");
  CHECK(m["gpufeed_version"] == version_string);
  CHECK(m["format"] == to_string(r.format));
  CHECK(m["records"] == r.records);
  CHECK(m["bytes"] == r.bytes);
  CHECK(m["has_labels"] == r.labels);
  REQUIRE(m["shards"].size() == r.shards.size());
  for (std::size_t s = 0; s < r.shards.size(); ++s) {
    const auto& j = m["shards"][s];
    const packed_shard& info = r.shard_info[s];
    CHECK(j["file"] == r.shards[s].filename().string());
    CHECK(j["records"] == info.records);
    CHECK(j["first_record"] == info.first_record);
    std::uint32_t crc = 0;
    std::uint64_t n = 0;
    for (std::uint64_t i = info.first_record; i < info.first_record + info.records; ++i) {
      const auto& b = want[static_cast<std::size_t>(i)];
      crc = static_cast<std::uint32_t>(
          crc32_combine(crc, gpufeed::test::crc_of(b), static_cast<z_off_t>(b.size())));
      n += b.size();
    }
    CHECK(j["bytes"] == n);
    CHECK(info.crc32 == crc);
    char hex[9];
    std::snprintf(hex, sizeof hex, "%08x", static_cast<unsigned>(crc));
    CHECK(j["crc32"] == hex);
  }
  for (std::size_t i = 0; i < label_names.size(); ++i) CHECK(m["labels"][label_names[i]] == i);
}

void check_hdf5(const pack_result& r, const std::vector<pack_input>& given) {
  const auto in = in_pack_order(r, given);
  const auto want = originals(in);
  hdf5_options o;
  if (r.labels) o.label_dataset = "labels";
  const hdf5_source src(r.shards, o);
  REQUIRE(src.size() == in.size());
  CHECK(gpufeed::test::read_all_records(src) == want);
  for (std::uint64_t i = 0; r.labels && i < src.size(); ++i)
    CHECK(src.label(i) == *in[static_cast<std::size_t>(i)].label);
  std::vector<std::string> names;
  for (const auto& shard : r.shards) {
    const hdf5_shard_extras x = read_hdf5_extras(shard);
    CHECK(x.has_names);
    CHECK(x.has_labels == r.labels);
    names.insert(names.end(), x.names.begin(), x.names.end());
  }
  REQUIRE(names.size() == in.size());
  for (std::size_t i = 0; i < in.size(); ++i) {
    CHECK(names[i] == in[i].name);
    CHECK(src.name_of(i) == in[i].name);
  }
}

void check_lmdb(const pack_result& r, const std::vector<pack_input>& given) {
  const auto in = in_pack_order(r, given);
  const auto want = originals(in);
  lmdb_options o;
  if (r.lmdb_datum) o.format = lmdb_options::value_format::datum;
  const lmdb_source src(r.shards, o);
  REQUIRE(src.size() == in.size());
  CHECK(gpufeed::test::read_all_records(src) == want);
  for (std::uint64_t i = 0; i < src.size(); ++i) {
    // Caffe's convention: the zero-padded record number, "_", the input's name.
    char digits[32];
    std::snprintf(digits, sizeof digits, "%010llu", static_cast<unsigned long long>(i));
    const std::string& name = in[static_cast<std::size_t>(i)].name;
    const auto k = src.key(i);
    CHECK(std::string(reinterpret_cast<const char*>(k.data()), k.size()) ==
          std::string(digits) + (name.empty() ? "" : "_" + name));
    CHECK(src.name_of(i) == (name.empty() ? std::nullopt : std::optional<std::string>(name)));
    if (r.lmdb_datum) CHECK(src.label(i) == in[static_cast<std::size_t>(i)].label.value_or(0));
  }
}

}  // namespace

TEST_CASE("HDF5: many small files of random sizes (0 included), several shards, deflate off/on") {
  gpufeed::test::temp_dir dir("h5rt");
  const fs::path root = dir / "in";
  gpufeed::test::make_tree(root, 300, 3000, 5, 11);
  const auto in = list_directory(root, true);
  for (int level : {0, 1, 6}) {
    CAPTURE(level);
    pack_options o;
    o.shard_bytes = 100000;
    o.deflate_level = level;
    o.chunk_bytes = 4096;  // chunks much smaller than shards: records straddle chunks
    o.threads = 3;
    o.verify = true;
    o.label_names = directory_labels(root);
    std::size_t calls = 0;
    pack_progress last;
    o.progress = [&](const pack_progress& p) {
      ++calls;
      last = p;
    };
    const fs::path out = dir / ("out" + std::to_string(level));
    const pack_result r = pack(in, out, o);
    CHECK(r.records == 300);
    CHECK(r.shards.size() >= 4);
    CHECK(r.labels);
    CHECK(calls >= 2);
    CHECK(last.verifying);
    CHECK(last.files_done == 300);
    for (std::size_t s = 0; s < r.shards.size(); ++s) {
      CHECK(r.shards[s] == out / ("shard-0000" + std::to_string(s) + ".h5"));
      CHECK(r.shard_info[s].bytes <= o.shard_bytes);
      const hdf5_source one(r.shards[s]);
      const hdf5_shard_info& info = one.shards().front();
      CHECK(info.layout == "blob");
      CHECK(info.read_path == (level ? hdf5_read_path::pread_decode : hdf5_read_path::pread_raw));
      CHECK(info.storage == (level ? "chunked" : "contiguous"));
      if (level)
        CHECK(info.filters == std::vector<std::string>{"deflate(" + std::to_string(level) + ")"});
    }
    check_hdf5(r, in);
    check_manifest(r, originals(in), directory_labels(root));
    // Only the shards and the manifest: no temporaries left.
    std::size_t entries = 0;
    for ([[maybe_unused]] const auto& e : fs::directory_iterator(out)) ++entries;
    CHECK(entries == r.shards.size() + 1);
  }
}

TEST_CASE("LMDB: raw values and Caffe Datum values, several shards") {
  gpufeed::test::temp_dir dir("mdbrt");
  const fs::path root = dir / "in";
  gpufeed::test::make_tree(root, 200, 6000, 3, 12);  // values above and below LMDB's node limit
  for (bool datum : {false, true}) {
    CAPTURE(datum);
    const auto in = list_directory(root, datum);  // raw values cannot hold labels
    pack_options o;
    o.format = shard_format::lmdb;
    o.shard_bytes = 150000;
    o.lmdb_datum = datum;
    o.threads = 2;
    o.verify = true;
    const fs::path out = dir / (datum ? "datum" : "raw");
    const pack_result r = pack(in, out, o);
    CHECK(r.shards.size() >= 3);
    CHECK(r.shards[0] == out / "shard-00000.lmdb");
    CHECK(fs::is_regular_file(r.shards[0] / "data.mdb"));
    CHECK_FALSE(fs::exists(r.shards[0] / "lock.mdb"));
    check_lmdb(r, in);
    check_manifest(r, originals(in), {});
    // The manifest lists every shard's counts and sizes: a source opens only what it reads, so
    // a damaged later shard is that shard's error at its first use, not the construction's.
    const fs::path bad = r.shards[2] / "data.mdb";
    std::ofstream(bad, std::ios::trunc) << std::string(20000, 'x');
    lmdb_options lo;
    if (datum) lo.format = lmdb_options::value_format::datum;
    const lmdb_source lazy(r.shards, lo);
    CHECK(lazy.shards_opened() == 1);
    CHECK(lazy.size() == in.size());
    std::vector<std::byte> buf(lazy.max_record_size());
    std::string named;
    try {
      lazy.read(r.shard_info[2].first_record, buf);
    } catch (const format_error& e) {
      named = e.file();
    }
    CHECK(named == bad.string());
  }
}

TEST_CASE("a file larger than a batch and a shard; shards of empty records only") {
  gpufeed::test::temp_dir dir("big");
  const fs::path root = dir / "in";
  gpufeed::test::write_file(root / "a_small", gpufeed::test::random_bytes(1000, 1));
  gpufeed::test::write_file(root / "b_big", gpufeed::test::patterned_bytes(5u << 20, 2));
  gpufeed::test::write_file(root / "c_empty", {});
  gpufeed::test::write_file(root / "d_small", gpufeed::test::random_bytes(5000, 3));
  const auto in = list_directory(root, false);
  for (int level : {0, 4}) {
    pack_options o;
    o.shard_bytes = 1u << 20;
    o.deflate_level = level;
    o.chunk_bytes = 256u << 10;
    o.threads = 4;
    const pack_result r = pack(in, dir / ("o" + std::to_string(level)), o);
    REQUIRE(r.shards.size() == 3);  // a_small | b_big | c_empty + d_small
    CHECK(r.shard_info[1].records == 1);
    check_hdf5(r, in);
    verify_pack(r);
  }
  pack_options o;
  o.format = shard_format::lmdb;
  check_lmdb(pack(in, dir / "mdb", o), in);

  const fs::path empty = dir / "empty";
  for (int k = 0; k < 3; ++k) gpufeed::test::write_file(empty / ("e" + std::to_string(k)), {});
  const auto ein = list_directory(empty, false);
  for (int level : {0, 9}) {
    pack_options eo;
    eo.deflate_level = level;
    const pack_result r = pack(ein, dir / ("e" + std::to_string(level)), eo);
    CHECK(r.bytes == 0);
    check_hdf5(r, ein);
  }
  pack_options mo;
  mo.format = shard_format::lmdb;
  check_lmdb(pack(ein, dir / "emdb", mo), ein);
}

TEST_CASE("determinism: byte-identical shards and manifest for any thread count, any time") {
  gpufeed::test::temp_dir dir("det");
  const fs::path root = dir / "in";
  gpufeed::test::make_tree(root, 120, 20000, 4, 13, true);
  const auto in = list_directory(root, true);
  struct variant {
    shard_format format;
    int level;
  };
  bool slept = false;
  for (const variant v : {variant{shard_format::hdf5, 0}, variant{shard_format::hdf5, 6},
                          variant{shard_format::lmdb, 0}}) {
    std::vector<fs::path> outs;
    for (std::size_t threads : {1, 3}) {
      pack_options o;
      o.format = v.format;
      o.lmdb_datum = v.format == shard_format::lmdb;  // Datum values: they hold the labels
      o.deflate_level = v.level;
      o.chunk_bytes = 16384;
      o.shard_bytes = 400000;
      o.threads = threads;
      o.label_names = directory_labels(root);
      outs.push_back(dir / ("d" + std::to_string(outs.size()) + to_string(v.format) +
                            std::to_string(v.level)));
      const pack_result r = pack(in, outs.back(), o);
      REQUIRE(r.shards.size() >= 3);
      if (!slept) {  // HDF5 time stamps have 1 s resolution: make sure a second passes once
        std::this_thread::sleep_for(std::chrono::milliseconds(1100));
        slept = true;
      }
    }
    std::vector<fs::path> files;
    for (const auto& e : fs::recursive_directory_iterator(outs[0]))
      if (e.is_regular_file()) files.push_back(fs::relative(e.path(), outs[0]));
    CHECK(files.size() >= 4);
    for (const auto& f : files) {
      CAPTURE(f);
      CHECK(read_file(outs[0] / f) == read_file(outs[1] / f));
    }
  }
}

TEST_CASE("verify_pack: a flipped byte in a shard is a corrupt_error naming the shard") {
  gpufeed::test::temp_dir dir("flip");
  const fs::path root = dir / "in";
  gpufeed::test::make_tree(root, 40, 2000, 2, 14);
  const bytes marker = gpufeed::test::random_bytes(256, 99);
  gpufeed::test::write_file(root / "c1/marker", marker);
  const auto in = list_directory(root, true);
  for (const auto format : {shard_format::hdf5, shard_format::lmdb}) {
    pack_options o;
    o.format = format;
    o.lmdb_datum = format == shard_format::lmdb;
    o.shard_bytes = 30000;
    const pack_result r = pack(in, dir / to_string(format), o);
    verify_pack(r);
    std::size_t hit = r.shards.size();
    for (std::size_t s = 0; s < r.shards.size(); ++s) {
      const fs::path f = format == shard_format::lmdb ? r.shards[s] / "data.mdb" : r.shards[s];
      if (gpufeed::test::flip_first(f, marker)) hit = s;
    }
    REQUIRE(hit < r.shards.size());
    try {
      verify_pack(r);
      FAIL("expected corrupt_error");
    } catch (const corrupt_error& e) {
      CHECK(e.file() == r.shards[hit].string());
    }
  }
  // Deflate: a damaged compressed chunk fails in the source's decoder (or its crc).
  pack_options o;
  o.deflate_level = 6;
  o.chunk_bytes = 1u << 20;
  const pack_result r = pack(in, dir / "deflate", o);
  const auto [addr, size] = gpufeed::test::chunk_extent(r.shards[0], "data", {0});
  gpufeed::test::flip_byte(r.shards[0], addr + size / 2, 0xff);
  CHECK_THROWS_AS(verify_pack(r), corrupt_error);
}

TEST_CASE("options and inputs are checked before anything is written") {
  gpufeed::test::temp_dir dir("opts");
  gpufeed::test::write_file(dir / "in/a", gpufeed::test::random_bytes(10, 1));
  auto in = list_directory(dir / "in", false);
  const fs::path out = dir / "out";
  auto bad = [&](pack_options o, const std::vector<pack_input>& inputs) {
    CHECK_THROWS_AS((void)pack(inputs, out, o), config_error);
    CHECK_FALSE(fs::exists(out));
  };
  pack_options o;
  bad(o, {});
  o.shard_bytes = 0;
  bad(o, in);
  o = {};
  o.deflate_level = 10;
  bad(o, in);
  o = {};
  o.format = shard_format::lmdb;
  o.deflate_level = 1;
  bad(o, in);
  o = {};
  o.lmdb_datum = true;
  bad(o, in);
  o = {};
  o.chunk_bytes = 0;
  bad(o, in);
  o = {};
  o.prefix = "../x";
  bad(o, in);
  o.prefix = ".hidden";
  bad(o, in);
  o.prefix = "a/b";
  bad(o, in);
  o = {};
  auto mixed = in;
  mixed.push_back({dir / "in/a", "again", 1});
  bad(o, mixed);
  o.format = shard_format::lmdb;
  o.lmdb_datum = true;
  auto big = in;
  big[0].label = std::int64_t{1} << 40;
  bad(o, big);
}
