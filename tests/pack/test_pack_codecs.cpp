// pack --compress: every codec read back byte for byte by hdf5_source and by h5py (+ hdf5plugin;
// Zstd through python3-zstandard on h5py's raw chunks, as no Debian plugin reads 32015); the
// pack-time shuffle (every input once, in the seeded order, the index -> name map right); and
// repack_hdf5 of an h5py-written gzip file with automatic chunks.
#include <doctest/doctest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "gpufeed/detail/codec/gpu_units.hpp"
#include "gpufeed/detail/codec/lz4.hpp"
#include "gpufeed/hdf5_source.hpp"
#include "gpufeed/pack/hdf5_extras.hpp"
#include "gpufeed/pack/pack.hpp"
#include "pack_test_util.hpp"
#include "test_util.hpp"

using namespace gpufeed;
namespace fs = std::filesystem;
using gpufeed::test::bytes;
using gpufeed::test::read_file;

namespace {

// Runs h5py_check.py with `args`: 0 when h5py agrees; 77 when h5py or a plugin is missing (the
// caller then says so and skips the h5py half).
int h5py_check(const std::string& args) {
  const std::string cmd =
      std::string(GPUFEED_TEST_PYTHON) + " " + GPUFEED_H5PY_CHECK + " " + args;
  const int rc = std::system(cmd.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : 128;
}

std::string q(const fs::path& p) { return "'" + p.string() + "'"; }

template <class T>
std::vector<T> in_pack_order(const pack_result& r, const std::vector<T>& given) {
  std::vector<T> v;
  for (const std::uint64_t i : r.input_of) v.push_back(given.at(static_cast<std::size_t>(i)));
  return v;
}

std::vector<bytes> files_of(const std::vector<pack_input>& in) {
  std::vector<bytes> v;
  for (const auto& i : in) v.push_back(read_file(i.path));
  return v;
}

nlohmann::json manifest(const pack_result& r) {
  return nlohmann::json::parse(gpufeed::test::read_text(r.manifest));
}

}  // namespace

TEST_CASE("every --compress codec: hdf5_source and h5py read the input files back exactly") {
  gpufeed::test::temp_dir dir("pkcodec");
  const fs::path root = dir / "in";
  gpufeed::test::make_tree(root, 90, 6000, 3, 5, /*compressible=*/true);
  gpufeed::test::write_file(root / "c0/random.bin", gpufeed::test::random_bytes(20000, 9));
  gpufeed::test::write_file(root / "c1/odd.bin", gpufeed::test::random_bytes(8191, 3));
  const auto in = list_directory(root, true);
  const auto want = files_of(in);
  struct variant {
    const char* spec;
    const char* filter;  // as hdf5_shard_info::filters names it (prefix)
  };
  for (const variant v : {variant{"none", ""}, variant{"deflate:6", "deflate"},
                          variant{"lz4", "lz4"}, variant{"zstd:3", "zstd"},
                          variant{"bitshuffle-lz4", "bitshuffle"}}) {
    CAPTURE(v.spec);
    pack_options o;
    o.compression = parse_compression(v.spec);
    o.chunk_bytes = 8192;  // records straddle chunks; edge chunks padded
    o.shard_bytes = 64 << 10;
    o.label_names = directory_labels(root);
    o.verify = true;
    const fs::path out = dir / (std::string("out-") + v.spec);
    const pack_result r = pack(in, out, o);
    REQUIRE(r.shards.size() >= 3);
    const hdf5_source src(r.shards);
    REQUIRE(src.size() == in.size());
    CHECK(gpufeed::test::read_all_records(src) == in_pack_order(r, want));
    for (const auto& s : src.shards()) {
      if (std::string(v.filter).empty()) {
        CHECK(s.storage == "contiguous");
        CHECK(s.read_path == hdf5_read_path::pread_raw);
        continue;
      }
      REQUIRE(s.filters.size() == 1);
      CHECK(s.filters[0].rfind(v.filter, 0) == 0);
      CHECK(s.read_path == hdf5_read_path::pread_decode);  // decoded by gpufeed, no plugin
      CHECK(s.chunk_shape ==
            std::vector<std::uint64_t>{std::min<std::uint64_t>(8192, s.data_bytes)});
    }
    CHECK(manifest(r)["options"]["compression"] == to_string(o.compression));
    const int rc = h5py_check("shards " + q(out) + " " + q(root));
    if (rc == 77) {
      std::cerr << "test_pack_codecs: h5py half skipped (scripts/setup.sh installs it)\n";
      continue;
    }
    CHECK_MESSAGE(rc == 0, "h5py read other bytes from the " << v.spec << " shards");
  }
  // The h5py check can fail: a manifest naming other files than the shards hold.
  const fs::path out = dir / "out-lz4";
  auto m = nlohmann::json::parse(gpufeed::test::read_text(out / "manifest.json"));
  std::size_t k = 1;  // the first record whose file differs from record 0's (0-byte files repeat)
  while (read_file(root / m["names"][0].get<std::string>()) ==
         read_file(root / m["names"][k].get<std::string>()))
    ++k;
  std::swap(m["names"][0], m["names"][k]);
  gpufeed::test::write_text(out / "manifest.json", m.dump());
  if (h5py_check("shards " + q(out) + " " + q(root)) != 77)
    CHECK(h5py_check("shards " + q(out) + " " + q(root)) == 1);
}

TEST_CASE("compression options: parse, levels, LMDB refuses") {
  CHECK(parse_compression("zstd:19").level == 19);
  CHECK(parse_compression("deflate").codec == pack_codec::deflate);
  CHECK(to_string(parse_compression("deflate")) == "deflate:4");
  CHECK(to_string(parse_compression("zstd")) == "zstd:3");
  for (const char* bad : {"lz4:3", "zstd:23", "deflate:0", "deflate:x", "brotli", ""})
    CHECK_THROWS_AS(parse_compression(bad), config_error);
  gpufeed::test::temp_dir dir("pkcopt");
  gpufeed::test::write_file(dir / "in/a", gpufeed::test::random_bytes(10, 1));
  pack_options o;
  o.format = shard_format::lmdb;
  o.compression = parse_compression("lz4");
  CHECK_THROWS_AS(pack(list_directory(dir / "in", false), dir / "out", o), config_error);
}

TEST_CASE("pack-time shuffle: every input once, in the seeded order, names map right") {
  gpufeed::test::temp_dir dir("pkshuf");
  const fs::path root = dir / "in";
  // Class-sorted input: 4 classes of 50 files each, listed class after class.
  std::vector<std::string> names;
  for (int c = 0; c < 4; ++c)
    for (int i = 0; i < 50; ++i) {
      const std::string n = "k" + std::to_string(c) + "/" + std::to_string(100 + i);
      gpufeed::test::write_file(root / n, gpufeed::test::random_bytes(64 + i, c * 50 + i));
      names.push_back(n);
    }
  const auto in = list_directory(root, true);
  const auto want = files_of(in);
  pack_options o;
  o.label_names = directory_labels(root);
  o.shard_bytes = 4096;
  const pack_result r = pack(in, dir / "a", o);  // the default: shuffled, seed 0
  CHECK(r.shuffled);
  CHECK(r.seed == 0);
  // Every input exactly once.
  std::vector<std::uint64_t> sorted = r.input_of;
  std::sort(sorted.begin(), sorted.end());
  std::vector<std::uint64_t> iota(in.size());
  std::iota(iota.begin(), iota.end(), 0);
  CHECK(sorted == iota);
  CHECK(r.input_of != iota);
  // The seeded order, the same on every machine (pinned: splitmix64 + rejection, no std::shuffle).
  CHECK(r.input_of == detail::pack::shuffled_order(in.size(), 0));
  CHECK(detail::pack::shuffled_order(6, 0) == std::vector<std::uint64_t>{4, 2, 5, 3, 0, 1});
  // Classes mixed: the first 20 records hold more than one label.
  const hdf5_source src(r.shards);
  std::set<std::int64_t> first_labels;
  for (std::uint64_t i = 0; i < 20; ++i) first_labels.insert(src.label(i));
  CHECK(first_labels.size() > 1);
  // Records, labels, shard names and the manifest's index -> name map agree with the inputs.
  const auto records = gpufeed::test::read_all_records(src);
  CHECK(records == in_pack_order(r, want));
  const auto m = manifest(r);
  CHECK(m["order"]["shuffled"] == true);
  CHECK(m["order"]["seed"] == 0);
  REQUIRE(m["names"].size() == in.size());
  std::vector<std::string> shard_names;
  for (const auto& s : r.shards) {
    const auto x = read_hdf5_extras(s);
    shard_names.insert(shard_names.end(), x.names.begin(), x.names.end());
  }
  for (std::uint64_t i = 0; i < in.size(); ++i) {
    const std::string n = m["names"][i];
    CHECK(n == in[r.input_of[i]].name);
    CHECK(shard_names.at(i) == n);
    CHECK(records[i] == read_file(root / n));
    CHECK(src.label(i) == static_cast<std::int64_t>(n[1] - '0'));
  }
  // Same seed: byte-identical output; another seed: another order; no shuffle: listing order.
  const pack_result again = pack(in, dir / "b", o);
  for (std::size_t s = 0; s < r.shards.size(); ++s)
    CHECK(read_file(r.shards[s]) == read_file(again.shards[s]));
  CHECK(read_file(r.manifest) == read_file(again.manifest));
  o.seed = 7;
  const pack_result seven = pack(in, dir / "c", o);
  CHECK(seven.input_of != r.input_of);
  CHECK(manifest(seven)["order"]["seed"] == 7);
  o.shuffle = false;
  const pack_result kept = pack(in, dir / "d", o);
  CHECK(kept.input_of == iota);
  CHECK(manifest(kept)["order"]["shuffled"] == false);
  CHECK(manifest(kept)["names"][0] == names[0]);
}

TEST_CASE("repack_hdf5: an h5py gzip + shuffle file with automatic chunks, every codec, verify") {
  gpufeed::test::temp_dir dir("pkrepack");
  const fs::path file = dir / "users.h5";
  const int made = h5py_check("make-gzip " + q(file) + " 600 1000");
  if (made == 77) {
    std::cerr << "test_pack_codecs: repack case skipped (needs python3-h5py)\n";
    return;
  }
  REQUIRE(made == 0);
  const hdf5_source users(file);
  REQUIRE(users.shards().front().filters.size() >= 2);  // shuffle + deflate, as h5py wrote it
  const auto rows = gpufeed::test::read_all_records(users);
  for (const char* spec : {"none", "lz4", "zstd", "bitshuffle-lz4", "deflate:1"}) {
    CAPTURE(spec);
    pack_options o;
    o.compression = parse_compression(spec);
    o.chunk_bytes = 64 << 10;  // 16 rows of 4000 bytes
    o.shard_bytes = 1 << 20;
    o.shuffle = false;
    o.verify = true;
    std::uint64_t progress_calls = 0;
    o.progress = [&](const pack_progress&) { ++progress_calls; };
    const fs::path out = dir / (std::string("r-") + spec);
    const pack_result r = repack_hdf5({file, "data", std::nullopt}, out, o);
    CHECK(progress_calls >= 2);  // the final report of packing and of verifying
    CHECK(r.labels);             // the "labels" dataset beside it, read by default
    const hdf5_source got(r.shards);
    REQUIRE(got.size() == 600);
    // The manifest states each shard's band height: decode units without opening shards.
    REQUIRE(r.shards.size() >= 3);
    CHECK(manifest(r)["shards"][1]["band_rows"] == (std::string(spec) == "none" ? 0 : 16));
    {
      hdf5_options eager;
      eager.open = hdf5_options::open_kind::eager;
      const hdf5_source opened(r.shards, eager);
      for (std::uint64_t i = 0; i < got.size(); ++i)
        REQUIRE(got.decode_unit(i) == opened.decode_unit(i));
      CHECK(got.shards_opened() == 1);
    }
    const auto& info = got.shards().front();
    CHECK(info.layout == "fixed");
    CHECK(info.dtype == "float32");
    CHECK(info.shape == std::vector<std::uint64_t>{info.records, 1000});
    if (std::string(spec) != "none")
      CHECK(info.chunk_shape == std::vector<std::uint64_t>{16, 1000});  // whole rows
    CHECK(gpufeed::test::read_all_records(got) == rows);
    for (std::uint64_t i = 0; i < got.size(); ++i) CHECK(got.label(i) == users.label(i));
    const int rc = h5py_check("rows " + q(out) + " " + q(file) + " data");
    CHECK((rc == 0 || rc == 77));
  }
  // Shuffled: row input_of[i] at record i; the manifest records the source rows.
  pack_options o;
  o.seed = 3;
  o.compression = parse_compression("lz4");
  const pack_result r = repack_hdf5({file, "data", ""}, dir / "shuffled", o);
  CHECK_FALSE(r.labels);
  const auto got = gpufeed::test::read_all_records(hdf5_source(r.shards));
  for (std::uint64_t i = 0; i < got.size(); ++i) CHECK(got[i] == rows[r.input_of[i]]);
  const auto m = manifest(r);
  CHECK(m["source"]["dataset"] == "data");
  CHECK(m["source"]["rows"][0] == r.input_of[0]);
  // A missing dataset is hdf5_source's format_error naming the file.
  CHECK_THROWS_AS(repack_hdf5({file, "nope", std::nullopt}, dir / "x", pack_options{}),
                  format_error);
}

TEST_CASE("pack's LZ4 chunks are cut into 64 KiB blocks that a GPU decodes side by side") {
  using gpufeed::detail::pack::chunk_codec;
  using kind = gpufeed::detail::codec::kind;
  std::vector<std::byte> in((1u << 20) + 100), out;
  for (std::size_t i = 0; i < in.size(); ++i)
    in[i] = static_cast<std::byte>((i / 4) % 7 == 0 ? i % 251 : 0);
  gpufeed::detail::pack::encode_chunk(chunk_codec{kind::lz4, 0, 4}, in, out);
  REQUIRE(out.size() > 12);
  CHECK(gpufeed::detail::codec::read_be64(out.data()) == in.size());
  CHECK(gpufeed::detail::codec::read_be32(out.data() + 8) == 65536u);
  std::vector<gpufeed::detail::codec::gpu_unit> units;
  REQUIRE(gpufeed::detail::codec::plan_lz4_chunk(out, 0, 0, in.size(), units).ok);
  CHECK(units.size() == 17);  // 16 whole blocks and the 100 bytes left
  std::vector<std::byte> back(in.size());
  REQUIRE(gpufeed::detail::codec::lz4_filter_decode(out, back).ok);
  CHECK(back == in);
}

TEST_CASE("LZ4 chunks of several 64 KiB blocks: hdf5_source and h5py read the input files back") {
  gpufeed::test::temp_dir dir("pkcodec-blocks");
  const fs::path root = dir / "in";
  gpufeed::test::make_tree(root, 90, 6000, 3, 5, /*compressible=*/true);
  const auto in = list_directory(root, true);
  pack_options o;
  o.compression = parse_compression("lz4");
  o.chunk_bytes = 256 << 10;  // four blocks a chunk
  o.label_names = directory_labels(root);
  const fs::path out = dir / "out";
  const pack_result r = pack(in, out, o);
  const hdf5_source src(r.shards);
  REQUIRE(src.size() == in.size());
  CHECK(gpufeed::test::read_all_records(src) == in_pack_order(r, files_of(in)));
  const int rc = h5py_check("shards " + q(out) + " " + q(root));
  if (rc == 77) {
    std::cerr << "test_pack_codecs: h5py half skipped (scripts/setup.sh installs it)\n";
    return;
  }
  CHECK_MESSAGE(rc == 0, "h5py read other bytes from LZ4 chunks of several blocks");
}

TEST_CASE("repack_hdf5 keeps float16 float16: h5py and hdf5_source read the source's bytes") {
  gpufeed::test::temp_dir dir("pkf16");
  const fs::path file = dir / "half.h5";
  const int made = h5py_check("make-f16 " + q(file) + " 50 12");
  if (made == 77) {
    std::cerr << "test_pack_codecs: float16 case skipped (needs python3-h5py)\n";
    return;
  }
  REQUIRE(made == 0);
  hdf5_options keep;
  keep.keep_float16 = true;
  const hdf5_source half(file, keep);
  REQUIRE(half.fixed_record_size() == 12 * 2);  // as stored, on a pread path
  CHECK(half.shards().front().read_path != hdf5_read_path::h5dread_fallback);
  CHECK(hdf5_source(file).fixed_record_size() == 12 * 4);  // by default: H5Dread's float32
  const auto rows = gpufeed::test::read_all_records(half);
  for (const char* spec : {"none", "zstd"}) {
    CAPTURE(spec);
    pack_options o;
    o.compression = parse_compression(spec);
    o.shuffle = false;
    o.verify = true;
    const fs::path out = dir / (std::string("r-") + spec);
    const pack_result r = repack_hdf5({file, "data", ""}, out, o);
    const hdf5_source got(r.shards, keep);
    CHECK(got.shards().front().dtype == "float16");
    CHECK(gpufeed::test::read_all_records(got) == rows);
    // h5py: the repacked rows have the source's dtype (float16) and bytes.
    const int rc = h5py_check("rows " + q(out) + " " + q(file) + " data");
    CHECK((rc == 0 || rc == 77));
  }
}
