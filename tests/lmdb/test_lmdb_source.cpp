// lmdb_source on environments written with the LMDB C API: raw and Datum values, key order,
// several shards, byte-for-byte reads through read() and readers.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "gpufeed/lmdb_source.hpp"
#include "gpufeed/source.hpp"
#include "lmdb_test_util.hpp"
#include "test_util.hpp"

using namespace gpufeed;
using namespace gpufeed::test;

static_assert(source<lmdb_source>);
static_assert(labeled_source<lmdb_source>);
static_assert(fixed_size_aware_source<lmdb_source>);
static_assert(reader_source<lmdb_source>);
static_assert(!std::is_copy_constructible_v<lmdb_source>);
static_assert(std::is_nothrow_move_constructible_v<lmdb_source>);
static_assert(std::is_nothrow_move_constructible_v<lmdb_source::reader>);
static_assert(!std::is_copy_constructible_v<lmdb_source::reader>);

namespace {

std::string read_all(const lmdb_source& s, std::uint64_t i) {
  std::vector<std::byte> buf(s.record_size(i) + 8, std::byte{0xee});
  s.read(i, buf);
  for (std::size_t k = s.record_size(i); k < buf.size(); ++k) CHECK(buf[k] == std::byte{0xee});
  return as_string(std::span<const std::byte>(buf).first(s.record_size(i)));
}
std::string read_with(lmdb_source::reader& r, const lmdb_source& s, std::uint64_t i) {
  std::vector<std::byte> buf(s.record_size(i));
  r.read(i, buf);
  return as_string(buf);
}

// Sizes across the interesting LMDB boundaries: empty, tiny, around half a page (node vs
// overflow page), around a page, and many pages (overflow runs) up to 100 KiB.
const std::vector<std::size_t> sizes = {0,    1,    2,    7,    100,  1000, 2000, 2020, 2040,
                                        2047, 2048, 2049, 4000, 4080, 4095, 4096, 4097, 8191,
                                        8192, 8193, 16384, 65535, 65536, 100 * 1024, 3, 0};

}  // namespace

TEST_CASE("raw values of every size, keys %08d: bytes, sizes, keys and shard info") {
  temp_dir dir("lmdb-raw");
  std::mt19937_64 rng(1);
  kv_list kv;
  for (std::size_t i = 0; i < sizes.size(); ++i) kv.emplace_back(key8(i), random_bytes(rng, sizes[i]));
  write_lmdb(dir.path(), kv);

  const lmdb_source s(dir.path());
  REQUIRE(s.size() == kv.size());
  CHECK_FALSE(s.has_labels());
  CHECK(s.fixed_record_size() == 0);
  CHECK(s.max_record_size() == 100 * 1024);
  auto r = s.make_reader();
  for (std::size_t i = 0; i < kv.size(); ++i) {
    CHECK(s.record_size(i) == kv[i].second.size());
    CHECK(as_string(s.key(i)) == kv[i].first);
    CHECK(read_all(s, i) == kv[i].second);
    CHECK(read_with(r, s, i) == kv[i].second);
  }
  REQUIRE(s.shards().size() == 1);
  const lmdb_shard_info& info = s.shards()[0];
  CHECK(info.path == dir.path());
  CHECK(info.first_record == 0);
  CHECK(info.records == kv.size());
  std::uint64_t total = 0;
  for (auto n : sizes) total += n;
  CHECK(info.data_bytes == total);
  CHECK(info.min_record == 0);
  CHECK(info.max_record == 100 * 1024);
  CHECK(info.format == "raw");
}

TEST_CASE("equal sizes give fixed_record_size; the data.mdb path and NOSUBDIR files open too") {
  temp_dir dir("lmdb-fixed");
  std::mt19937_64 rng(2);
  kv_list kv;
  for (int i = 0; i < 300; ++i) kv.emplace_back(key8(i), random_bytes(rng, 3000));
  write_lmdb(dir / "env", kv);
  lmdb_write_options nosub;
  nosub.env_flags = MDB_NOSUBDIR;
  write_lmdb(dir / "single.lmdb", kv, nosub);

  for (const auto& p : {dir / "env", dir / "env" / "data.mdb", dir / "single.lmdb"}) {
    CAPTURE(p);
    const lmdb_source s(p);
    CHECK(s.size() == 300);
    CHECK(s.fixed_record_size() == 3000);
    CHECK(s.max_record_size() == 3000);
    for (int i : {0, 1, 150, 299}) CHECK(read_all(s, i) == kv[i].second);
  }
}

TEST_CASE("arbitrary byte keys: record order is LMDB's key order") {
  temp_dir dir("lmdb-keys");
  std::mt19937_64 rng(3);
  std::map<std::string, std::string> sorted;  // std::string compares like memcmp + length
  // NUL bytes, keys that are prefixes of others, LMDB's longest key (511 bytes), then random keys.
  for (std::string k : {std::string(1, '\0'), std::string(2, '\0'), std::string("\0a", 2),
                        std::string("a"), std::string("a\0", 2), std::string("ab"),
                        std::string(511, 'z'), std::string("\xff\xff", 2)})
    sorted.emplace(k, random_bytes(rng, rng() % 5000));
  while (sorted.size() < 500) sorted.emplace(random_bytes(rng, 1 + rng() % 40), random_bytes(rng, rng() % 5000));
  kv_list kv(sorted.begin(), sorted.end());
  std::shuffle(kv.begin(), kv.end(), rng);  // insertion order must not matter
  write_lmdb(dir.path(), kv);

  const lmdb_source s(dir.path());
  REQUIRE(s.size() == sorted.size());
  std::size_t i = 0;
  for (const auto& [k, v] : sorted) {
    CHECK(as_string(s.key(i)) == k);
    CHECK(read_all(s, i) == v);
    ++i;
  }
}

TEST_CASE("several shards are one record space, in the order given") {
  temp_dir dir("lmdb-shards");
  std::mt19937_64 rng(4);
  const std::vector<std::size_t> counts = {5, 1, 40, 17};
  std::vector<std::filesystem::path> paths;
  std::vector<std::string> expect_keys, expect_values;
  for (std::size_t sh = 0; sh < counts.size(); ++sh) {
    kv_list kv;
    for (std::size_t i = 0; i < counts[sh]; ++i)
      kv.emplace_back("s" + std::to_string(sh) + "-" + key8(i), random_bytes(rng, 1 + rng() % 9000));
    write_lmdb(dir / ("shard" + std::to_string(sh)), kv);
    paths.push_back(dir / ("shard" + std::to_string(sh)));
  }
  // Given in reverse order: shard 3 first.
  std::reverse(paths.begin(), paths.end());
  const lmdb_source s(paths);
  std::uint64_t first = 0;
  REQUIRE(s.shards().size() == 4);
  for (std::size_t k = 0; k < paths.size(); ++k) {
    const auto& info = s.shards()[k];
    CHECK(info.path == paths[k]);
    CHECK(info.first_record == first);
    CHECK(info.records == counts[counts.size() - 1 - k]);
    first += info.records;
  }
  REQUIRE(s.size() == first);
  // Every record: key prefix names its shard, bytes match a fresh single-shard source.
  for (std::size_t k = 0; k < paths.size(); ++k) {
    const lmdb_source one(paths[k]);
    const auto& info = s.shards()[k];
    std::uint64_t bytes = 0;
    for (std::uint64_t i = 0; i < info.records; ++i) {
      CHECK(as_string(s.key(info.first_record + i)) == as_string(one.key(i)));
      CHECK(read_all(s, info.first_record + i) == read_all(one, i));
      bytes += one.record_size(i);
    }
    CHECK(info.data_bytes == bytes);
  }
}

TEST_CASE("Datum values: payloads, labels, packed and unpacked float_data") {
  temp_dir dir("lmdb-datum");
  std::mt19937_64 rng(5);
  kv_list kv;
  std::vector<std::string> payloads;
  std::vector<int> labels;
  for (int i = 0; i < 120; ++i) {
    const int label = static_cast<int>(rng() % 1000) - 10;
    std::string value, expect;
    switch (i % 5) {
      case 0: {  // pixels, Caffe's field order
        expect = random_bytes(rng, 3 * 8 * 8);
        value = caffe_datum(3, 8, 8, expect, label);
        break;
      }
      case 1: {  // encoded image, label first, unknown fields
        expect = random_bytes(rng, 1 + rng() % 20000);
        pb_writer p;
        p.int32(5, label).fixed64(30, 1).bytes(4, expect).boolean(7, true).bytes(31, "x");
        value = p.str();
        break;
      }
      case 2: {  // packed floats
        std::vector<float> fs(1 + rng() % 300);
        for (auto& f : fs) f = static_cast<float>(rng() % 10000) / 7.0f;
        expect = pb_writer::float_bytes(fs);
        value = pb_writer().int32(1, 1).int32(2, 1).int32(3, static_cast<int>(fs.size()))
                    .floats_packed(6, fs).int32(5, label).str();
        break;
      }
      case 3: {  // unpacked floats (gathered at read)
        std::vector<float> fs(1 + rng() % 50);
        pb_writer p;
        p.int32(5, label);
        for (auto& f : fs) {
          f = static_cast<float>(rng() % 100) - 50.0f;
          p.float_unpacked(6, f);
        }
        expect = pb_writer::float_bytes(fs);
        value = p.str();
        break;
      }
      default: {  // large data in overflow pages, label at the end
        expect = random_bytes(rng, 50000);
        value = caffe_datum(1, 1, 50000, expect, label);
      }
    }
    kv.emplace_back(key8(i), value);
    payloads.push_back(expect);
    labels.push_back(label);
  }
  write_lmdb(dir.path(), kv);

  lmdb_options o;
  o.format = lmdb_options::value_format::datum;
  const lmdb_source s(dir.path(), o);
  REQUIRE(s.size() == kv.size());
  CHECK(s.has_labels());
  CHECK(s.shards()[0].format == "datum");
  auto r = s.make_reader();
  for (std::size_t i = 0; i < kv.size(); ++i) {
    CAPTURE(i);
    CHECK(s.record_size(i) == payloads[i].size());
    CHECK(s.label(i) == labels[i]);
    CHECK(read_all(s, i) == payloads[i]);
    CHECK(read_with(r, s, i) == payloads[i]);
  }
  // The same shard as raw values delivers the whole Datum.
  const lmdb_source raw(dir.path());
  CHECK(read_all(raw, 3) == kv[3].second);
}

TEST_CASE("index and destination checks: config_error naming the record") {
  temp_dir dir("lmdb-config");
  write_lmdb(dir.path(), {{"a", "12345"}, {"b", "67"}});
  const lmdb_source s(dir.path());
  auto r = s.make_reader();
  std::vector<std::byte> buf(16);
  auto expect_config = [](auto&& f, std::uint64_t rec, bool names_file) {
    try {
      f();
      FAIL("no config_error");
    } catch (const config_error& e) {
      CHECK(e.record() == rec);
      CHECK(e.file().empty() != names_file);
    }
  };
  expect_config([&] { (void)s.record_size(2); }, 2, false);
  expect_config([&] { s.read(2, buf); }, 2, false);
  expect_config([&] { r.read(7, buf); }, 7, false);
  expect_config([&] { (void)s.key(2); }, 2, false);
  expect_config([&] { (void)s.label(0); }, 0, false);  // raw: no labels
  expect_config([&] { s.read(0, std::span<std::byte>(buf).first(4)); }, 0, true);
  expect_config([&] { r.read(0, std::span<std::byte>(buf).first(4)); }, 0, true);
  s.read(1, std::span<std::byte>(buf).first(2));  // exact size is fine
  CHECK(as_string(std::span<const std::byte>(buf).first(2)) == "67");
}

TEST_CASE("readers survive moves and the end of their source; mutable shards use the lock file") {
  temp_dir dir("lmdb-move");
  kv_list kv;
  for (int i = 0; i < 50; ++i) kv.emplace_back(key8(i), std::string(static_cast<std::size_t>(i), static_cast<char>('a' + i % 26)));
  write_lmdb(dir.path(), kv);
  for (bool immutable : {true, false}) {
    lmdb_options o;
    o.immutable = immutable;
    o.max_readers = 8;
    lmdb_source a(dir.path(), o);
    auto r = a.make_reader();
    lmdb_source b(std::move(a));
    lmdb_source c(dir.path(), o);
    c = std::move(b);
    for (int i = 0; i < 50; ++i) {
      CHECK(read_with(r, c, i) == kv[i].second);
      CHECK(read_all(c, i) == kv[i].second);
    }
    auto r2 = c.make_reader();
    { lmdb_source gone(std::move(c)); }
    std::vector<std::byte> buf(64);
    r2.read(49, buf);
    CHECK(as_string(std::span<const std::byte>(buf).first(49)) == kv[49].second);
  }
}
