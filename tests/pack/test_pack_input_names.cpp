// A failed record names its input: a folder with one corrupt "JPEG" is packed into HDF5 and LMDB
// shards, and a per-record transform that refuses it (as an image decoder would: corrupt_error
// naming only the record) runs in the loader under the throw, skip and substitute policies. The
// error, and batch::skipped()'s entry, name the input file as pack read it; name_of gives every
// record's input name; a shard without names, or with a damaged names table, still reports the
// transform's own error.
#include <doctest/doctest.h>
#include <hdf5.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "gpufeed/hdf5_source.hpp"
#include "gpufeed/lmdb_source.hpp"
#include "gpufeed/loader.hpp"
#include "gpufeed/pack/pack.hpp"
#include "gpufeed/record_transform.hpp"
#include "h5_writer.hpp"
#include "pack_test_util.hpp"
#include "test_util.hpp"
#include "watchdog.hpp"

using namespace gpufeed;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

static_assert(record_naming_source<hdf5_source>);
static_assert(record_naming_source<lmdb_source>);

namespace {

const std::string corrupt_name = "train/cat/0042.jpg";

// 40 files under train/{cat,dog}/, random bytes; the one at corrupt_name starts "CORRUPT".
std::vector<pack_input> make_folder(const fs::path& root) {
  for (int i = 0; i < 40; ++i) {
    char name[64];
    std::snprintf(name, sizeof name, "train/%s/%04d.jpg", i % 2 ? "dog" : "cat", 2 * i + 2);
    test::bytes b = test::random_bytes(100 + static_cast<std::size_t>(i) * 37, 7u + i);
    if (name == corrupt_name) std::memcpy(b.data(), "CORRUPT", 7);
    test::write_file(root / name, b);
  }
  return list_directory(root, false);
}

// Fixed 16-byte output (the input's first bytes, zero-padded); corrupt_error for a record that
// starts "CORRUPT", with the record only, as gpufeed::image's transforms report a bad image.
record_transform decoder() {
  return record_transform::fixed(16, [](const record_input& in, std::span<std::byte> out,
                                        record_rng&) {
    if (in.bytes.size() >= 7 && std::memcmp(in.bytes.data(), "CORRUPT", 7) == 0) {
      error_context c;
      c.record = in.index;
      throw corrupt_error("corrupt JPEG data", std::move(c));
    }
    std::fill(out.begin(), out.end(), std::byte{0});
    std::memcpy(out.data(), in.bytes.data(), std::min(in.bytes.size(), out.size()));
  });
}

loader_config config(error_policy p) {
  loader_config c;
  c.batch_size = 8;
  c.order = sample_order::sequential;
  c.epochs = 1;
  c.workers = 2;
  c.on_error = p;
  c.per_record = decoder();
  return c;
}

// The record that holds `name` (pack shuffles by default).
std::uint64_t record_of(const pack_result& r, const std::vector<pack_input>& in,
                        const std::string& name) {
  for (std::uint64_t i = 0; i < r.input_of.size(); ++i)
    if (in[r.input_of[i]].name == name) return i;
  FAIL("no record holds " << name);
  return 0;
}

// The shard of a pack that holds record i.
std::string shard_of(const pack_result& r, std::uint64_t i) {
  for (const auto& s : r.shard_info)
    if (i >= s.first_record && i < s.first_record + s.records) return s.file.string();
  return {};
}

// Under each policy the corrupt record's error or skipped() entry names its input.
template <class Source>
void check_policies(const Source& src, const pack_result& r, const std::vector<pack_input>& in) {
  const std::uint64_t bad = record_of(r, in, corrupt_name);
  const std::string where = "[file '" + shard_of(r, bad) + "', record " + std::to_string(bad) +
                            ", input '" + corrupt_name + "']";
  {
    loader<Source> l(src, config(error_policy::throw_error));
    int errors = 0;
    for (;;) {
      try {
        if (!l.next()) break;
      } catch (const corrupt_error& e) {
        ++errors;
        CHECK(e.input() == corrupt_name);
        CHECK(e.record() == bad);
        CHECK(e.describe() == "record transform failed: corrupt JPEG data " + where);
        CHECK(std::string(e.what()).find(where) != std::string::npos);
      }
    }
    CHECK(errors == 1);
  }
  for (const error_policy p : {error_policy::skip, error_policy::substitute}) {
    CAPTURE(static_cast<int>(p));
    loader<Source> l(src, config(p));
    std::vector<skipped_record> skipped;
    while (auto b = l.next())
      skipped.insert(skipped.end(), b->skipped().begin(), b->skipped().end());
    REQUIRE(skipped.size() == 1);
    CHECK(skipped[0].index == bad);
    CHECK(skipped[0].input == corrupt_name);
    CHECK(skipped[0].substituted == (p == error_policy::substitute));
    CHECK(skipped[0].what.find(where) != std::string::npos);
  }
}

}  // namespace

TEST_CASE("HDF5 pack: name_of gives every input's name; a failed transform names its input") {
  test::watchdog dog(120s, "input names hdf5");
  test::temp_dir dir("names-h5");
  const auto in = make_folder(dir / "photos");
  pack_options o;
  o.shard_bytes = 1500;  // several shards
  const pack_result r = pack(in, dir / "shards", o);
  REQUIRE(r.shards.size() > 2);
  const hdf5_source src(r.shards);
  REQUIRE(src.size() == in.size());
  for (std::uint64_t i = 0; i < src.size(); ++i) CHECK(src.name_of(i) == in[r.input_of[i]].name);
  CHECK_THROWS_AS((void)src.name_of(src.size()), config_error);
  check_policies(src, r, in);
}

TEST_CASE("LMDB pack: keys are <10 digits>_<name> in record order; name_of reads the name back") {
  test::watchdog dog(120s, "input names lmdb");
  test::temp_dir dir("names-mdb");
  auto in = make_folder(dir / "photos");
  // A name too long for LMDB's 511-byte keys: its key keeps the digits only.
  const std::string long_name = std::string(200, 'a') + "/" + std::string(200, 'b') + "/" +
                                std::string(150, 'c') + ".jpg";
  test::write_file(dir / "photos" / long_name, test::random_bytes(50, 3));
  in = list_directory(dir / "photos", false);
  pack_options o;
  o.format = shard_format::lmdb;
  o.shard_bytes = 1500;
  const pack_result r = pack(in, dir / "shards", o);
  REQUIRE(r.shards.size() > 2);
  lmdb_options lo;
  if (r.lmdb_datum) lo.format = lmdb_options::value_format::datum;
  const lmdb_source src(r.shards, lo);
  REQUIRE(src.size() == in.size());
  const std::uint64_t long_record = record_of(r, in, long_name);
  for (std::uint64_t i = 0; i < src.size(); ++i) {
    CAPTURE(i);
    const auto k = src.key(i);
    const std::string key(reinterpret_cast<const char*>(k.data()), k.size());
    char digits[16];
    std::snprintf(digits, sizeof digits, "%010llu", static_cast<unsigned long long>(i));
    if (i == long_record) {
      CHECK(key == digits);
      CHECK_FALSE(src.name_of(i));
    } else {
      CHECK(key == std::string(digits) + "_" + in[r.input_of[i]].name);
      CHECK(src.name_of(i) == in[r.input_of[i]].name);
    }
  }
  // Record order is key order: the source (which reads keys in LMDB's order) holds each input
  // at the record pack put it.
  for (std::uint64_t i = 0; i < src.size(); ++i) {
    std::vector<std::byte> b(src.record_size(i));
    src.read(i, b);
    CHECK(b == test::read_file(in[r.input_of[i]].path));
  }
  check_policies(src, r, in);
}

TEST_CASE("lmdb_source::name_of: Caffe's 8-digit keys carry names; keys without one give none") {
  namespace l = detail::lmdb;
  const auto name = [](std::string k) {
    return l::name_in_key(std::as_bytes(std::span<const char>(k.data(), k.size())));
  };
  CHECK(name("00000042_train/cat/1.jpg") == "train/cat/1.jpg");
  CHECK(name("0000000042_a_b.jpg") == "a_b.jpg");
  CHECK_FALSE(name("0000000042"));
  CHECK_FALSE(name("0000000042_"));
  CHECK_FALSE(name("_x"));
  CHECK_FALSE(name("key-1"));
  CHECK(l::record_key(42, "x") == "0000000042_x");
  CHECK(l::record_key(42, "") == "0000000042");
  CHECK(l::record_key(7, std::string(500, 'n')) == "0000000007_" + std::string(500, 'n'));
  CHECK(l::record_key(7, std::string(501, 'n')) == "0000000007");  // 512 bytes: too long
}

namespace {

// A blob shard of 4 records (bytes "r0".."r3") with the names table given, or none.
void write_shard(const fs::path& p, const std::optional<std::vector<std::uint64_t>>& name_offsets,
                 const std::string& names) {
  test::h5_file f(p);
  const std::string data = "r0r1r2CORRUPT-r3";
  test::dataset_spec d;
  d.dims = {data.size()};
  f.add_raw(d, data.data());
  f.add_offsets({0, 2, 4, 6, 16});
  if (!name_offsets) return;
  test::h5_id g(H5Gcreate2(f.id(), "names", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose,
                "H5Gcreate2");
  test::dataset_spec nd;
  nd.name = "names/data";
  nd.dims = {names.size()};
  f.add_raw(nd, names.data());
  test::dataset_spec no = test::offsets_spec(name_offsets->size());
  no.name = "names/offsets";
  f.add(no, *name_offsets);
}

// The error the loader reports for record 3 ("CORRUPT..."), under throw_error.
corrupt_error failure_of(const hdf5_source& src) {
  loader_config c = config(error_policy::throw_error);
  c.batch_size = 4;
  loader<hdf5_source> l(src, c);
  try {
    (void)l.next();
  } catch (const corrupt_error& e) {
    return e;
  }
  FAIL("record 3's transform did not fail");
  return corrupt_error("unreachable");
}

}  // namespace

TEST_CASE("HDF5 names table: absent or damaged, the transform's own error still arrives") {
  test::watchdog dog(60s, "input names damaged");
  test::temp_dir dir("names-bad");
  const std::string names = "a.jpgb.jpgc.jpgd.jpg";
  const auto shard = [&](const std::string& tag, std::optional<std::vector<std::uint64_t>> o) {
    const fs::path p = dir / (tag + ".h5");
    write_shard(p, o, names);
    return p;
  };
  {
    const hdf5_source src(shard("good", std::vector<std::uint64_t>{0, 5, 10, 15, 20}));
    CHECK(src.name_of(1) == "b.jpg");
    const corrupt_error e = failure_of(src);
    CHECK(e.input() == "d.jpg");
    CHECK(e.describe().find("record 3, input 'd.jpg']") != std::string::npos);
  }
  {
    const hdf5_source src(shard("none", std::nullopt));
    CHECK_FALSE(src.name_of(3));
    const corrupt_error e = failure_of(src);
    CHECK(e.input().empty());
    CHECK(e.describe().find("input") == std::string::npos);
    CHECK(e.describe().find("record 3]") != std::string::npos);
  }
  const std::vector<std::vector<std::uint64_t>> damaged = {
      {0, 5, 10, 15, 25},        // record 3's end past names/data
      {0, 5, 10, 15, 12},        // out of order
      {0, 5, 10, 15},            // too few entries
      {0, 5, 10, 15, 20, 20},    // too many
      {0, 5, 10, ~0ull, ~0ull},  // huge
  };
  for (std::size_t k = 0; k < damaged.size(); ++k) {
    CAPTURE(k);
    const hdf5_source src(shard("bad" + std::to_string(k), damaged[k]));
    CHECK_THROWS_AS((void)src.name_of(3), format_error);
    const corrupt_error e = failure_of(src);
    CHECK(e.message() == "record transform failed: corrupt JPEG data");
    CHECK(e.record() == 3u);
    CHECK(e.input().empty());
  }
}
