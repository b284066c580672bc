// Lazy shard opening for lmdb_source: over many shards it opens only the first at construction
// and each other one when a record of it is first used (shards_opened(), and descriptors counted
// in /proc/self/fd). Record counts and sizes come from pack's manifest (or a scan at
// construction that closes each shard again); a bad shard's typed error names it at each use
// while the others read; a manifest that no longer matches a shard is a format_error naming it;
// many threads touching one shard first at once open it once; an epoch through the loader
// delivers every record once with its bytes.
#include <doctest/doctest.h>

#include <atomic>
#include <barrier>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "expect_error.hpp"
#include "gpufeed/lmdb_source.hpp"
#include "gpufeed/loader.hpp"
#include "gpufeed/pack/detail/manifest.hpp"
#include "lmdb_test_util.hpp"
#include "fd_count.hpp"
#include "test_util.hpp"

using namespace gpufeed;
namespace fs = std::filesystem;
using gpufeed::test::fds_under;

namespace {

constexpr int shard_count = 12;

std::uint64_t records_of(int k) { return 10 + static_cast<std::uint64_t>(k); }
std::uint64_t first_of(int k) {
  std::uint64_t f = 0;
  for (int j = 0; j < k; ++j) f += records_of(j);
  return f;
}
// Record r of shard k: (r % 7) + 1 + k bytes (all `fixed` bytes when fixed != 0), byte j =
// k + r + j.
std::string value(int k, std::uint64_t r, std::size_t fixed = 0) {
  std::string v(fixed ? fixed : static_cast<std::size_t>(r % 7 + 1 + k), '\0');
  for (std::size_t j = 0; j < v.size(); ++j) v[j] = static_cast<char>(k + r + j);
  return v;
}

struct shard_set {
  std::vector<fs::path> paths;
  fs::path real;  // canonical directory, for descriptor counts
};

// The shards (directories s-1000k) and, with `manifest`, pack's manifest listing them.
// lie_about: that shard is listed with one record more than it holds.
shard_set write_shards(const fs::path& dir, bool manifest, std::size_t fixed = 0,
                       int lie_about = -1) {
  detail::pack::manifest_data m;
  m.format = "lmdb";
  shard_set out;
  for (int k = 0; k < shard_count; ++k) {
    out.paths.push_back(dir / ("s-" + std::to_string(10000 + k) + ".lmdb"));
    test::kv_list kv;
    detail::pack::manifest_shard s;
    s.file = out.paths.back().filename().string();
    s.records = records_of(k) + (k == lie_about ? 1 : 0);
    s.first_record = first_of(k);
    s.min_record = ~std::uint64_t{0};
    for (std::uint64_t r = 0; r < records_of(k); ++r) {
      kv.emplace_back(test::key8(r), value(k, r, fixed));
      s.max_record = std::max<std::uint64_t>(s.max_record, kv.back().second.size());
      s.min_record = std::min<std::uint64_t>(s.min_record, kv.back().second.size());
    }
    test::write_lmdb(out.paths.back(), kv);
    m.shards.push_back(s);
  }
  if (manifest) std::ofstream(dir / "manifest.json") << detail::pack::manifest_text(m);
  out.real = fs::canonical(dir);
  return out;
}

void check_record(const lmdb_source& src, int k, std::uint64_t r) {
  const std::string want = value(k, r);
  const std::uint64_t i = first_of(k) + r;
  REQUIRE(src.record_size(i) == want.size());
  std::vector<std::byte> got(want.size());
  src.read(i, got);
  CHECK(test::as_string(got) == want);
}

}  // namespace

TEST_CASE("lmdb lazy: only the first shard is open after construction; touched shards open once") {
  for (const bool manifest : {true, false}) {
    CAPTURE(manifest);
    test::temp_dir dir("lmlazy");
    const auto set = write_shards(dir.path(), manifest);
    const lmdb_source src(set.paths);
    std::size_t max = 0;
    for (int k = 0; k < shard_count; ++k) max = std::max(max, value(k, 6).size());
    CHECK(src.size() == first_of(shard_count));  // the record space is whole before any open
    CHECK(src.max_record_size() == max);         // and the largest record (the slots' size)
    CHECK(src.fixed_record_size() == 0);
    CHECK(src.shards_opened() == 1);
    CHECK(fds_under(set.real) == 1);
    CHECK_FALSE(src.shard_info(5).opened);
    CHECK(src.shard_info(5).records == records_of(5));
    CHECK(src.shard_info(5).first_record == first_of(5));
    // A partition touching shards 3 and 7: their records, and nothing else, open.
    for (std::uint64_t r = 0; r < records_of(3); ++r) check_record(src, 3, r);
    CHECK(src.shards_opened() == 2);
    CHECK(test::as_string(src.key(first_of(7) + 4)) == test::key8(4));  // a key opens shard 7
    check_record(src, 7, 0);
    CHECK(src.shards_opened() == 3);
    CHECK(fds_under(set.real) == 3);
    const lmdb_shard_info seven = src.shard_info(7);
    CHECK(seven.opened);
    CHECK(seven.first_record == first_of(7));
    CHECK(seven.max_record == value(7, 6).size());
    // file_of names a record's shard without opening it (the loader's errors name files so).
    CHECK(src.file_of(first_of(9) + 1) == set.paths[9]);
    CHECK(src.shards_opened() == 3);
    CHECK(test::has(test::error_of<config_error>([&] { (void)src.file_of(src.size()); }),
                    "out of range"));
    // shards() describes every shard: that opens them all.
    CHECK(src.shards().size() == shard_count);
    CHECK(src.shards_opened() == shard_count);
    CHECK(fds_under(set.real) == shard_count);
    for (int k = 0; k < shard_count; ++k) check_record(src, k, records_of(k) - 1);
  }
}

TEST_CASE("lmdb lazy: fixed-size records are known from the manifest; sizes open nothing") {
  test::temp_dir dir("lmfixed");
  const auto set = write_shards(dir.path(), true, /*fixed=*/24);
  const lmdb_source src(set.paths);
  CHECK(src.fixed_record_size() == 24);
  CHECK(src.max_record_size() == 24);
  for (std::uint64_t i = 0; i < src.size(); ++i) CHECK(src.record_size(i) == 24);
  CHECK(src.shards_opened() == 1);
}

TEST_CASE("lmdb eager opens every shard at construction") {
  test::temp_dir dir("lmeager");
  const auto set = write_shards(dir.path(), true);
  lmdb_options o;
  o.open = lmdb_options::open_kind::eager;
  const lmdb_source src(set.paths, o);
  CHECK(src.shards_opened() == shard_count);
  CHECK(fds_under(set.real) == shard_count);
  for (int k = 0; k < shard_count; ++k) check_record(src, k, 2);
  lmdb_options m;
  m.immutable = false;  // mutable shards: their tables are taken at construction
  const lmdb_source mut(set.paths, m);
  CHECK(mut.shards_opened() == shard_count);
}

TEST_CASE("lmdb lazy: a bad shard's typed error names it at each use; the others read") {
  test::temp_dir dir("lmbad");
  const auto set = write_shards(dir.path(), true);
  const fs::path data5 = set.paths[5] / "data.mdb";
  std::ofstream(data5, std::ios::trunc) << std::string(20000, 'x');  // no meta page
  const lmdb_source src(set.paths);  // the manifest says what shard 5 holds: not opened here
  std::vector<std::byte> buf(src.max_record_size());
  for (int attempt = 0; attempt < 2; ++attempt) {
    const std::string e =
        test::error_of<format_error>([&] { src.read(first_of(5) + 1, buf); });
    CHECK(test::has(e, data5.string()));
    CHECK(test::has(e, "not an LMDB environment"));
    CHECK(test::has(test::error_of<format_error>([&] { (void)src.record_size(first_of(5)); }),
                    data5.string()));
  }
  auto reader = src.make_reader();
  CHECK(test::has(test::error_of<format_error>([&] { reader.read(first_of(5), buf); }),
                  data5.string()));
  check_record(src, 4, 3);
  check_record(src, 6, 3);
  CHECK(src.shards_opened() == 3);
  // Without a manifest every shard is scanned at construction: the error comes from there.
  test::temp_dir plain("lmbad2");
  const auto p2 = write_shards(plain.path(), false);
  std::ofstream(p2.paths[5] / "data.mdb", std::ios::trunc) << std::string(20000, 'x');
  CHECK(test::has(test::error_of<format_error>([&] { lmdb_source s(p2.paths); }),
                  (p2.paths[5] / "data.mdb").string()));
}

TEST_CASE("lmdb lazy: a manifest that no longer matches its shard: format_error naming it") {
  test::temp_dir dir("lmstale");
  const auto set = write_shards(dir.path(), true, 0, /*lie_about=*/4);
  const lmdb_source src(set.paths);
  CHECK(src.size() == first_of(shard_count) + 1);
  std::vector<std::byte> buf(src.max_record_size());
  const std::string e = test::error_of<format_error>([&] { src.read(first_of(4), buf); });
  CHECK(test::has(e, (set.paths[4] / "data.mdb").string()));
  CHECK(test::has(e, "the shard changed since"));
  CHECK(test::has(e, "manifest"));
  // Global indices after it are the manifest's (one more): shard 5 still reads.
  std::vector<std::byte> got(value(5, 0).size());
  src.read(first_of(5) + 1, got);
  CHECK(test::as_string(got) == value(5, 0));
}

TEST_CASE("lmdb lazy: a manifest for other values (Datum) is not used; sizes from the scan") {
  test::temp_dir dir("lmdatum");
  const auto set = write_shards(dir.path(), true);
  std::string t;
  {
    std::ifstream in(dir.path() / "manifest.json");
    t.assign(std::istreambuf_iterator<char>(in), {});
  }
  const std::string from = "\"lmdb_datum\": false", to = "\"lmdb_datum\": true";
  REQUIRE(t.find(from) != std::string::npos);
  t.replace(t.find(from), from.size(), to);
  std::ofstream(dir.path() / "manifest.json", std::ios::trunc) << t;
  const lmdb_source src(set.paths);  // raw values: the Datum manifest's sizes are not theirs
  CHECK(src.shards_opened() == 1);
  for (int k = 0; k < shard_count; ++k) check_record(src, k, 1);
}

TEST_CASE("lmdb lazy: many threads touching unopened shards at once open each once") {
  test::temp_dir dir("lmrace");
  const auto set = write_shards(dir.path(), true);
  const lmdb_source src(set.paths);
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
        const std::string want = value(k, r);
        std::vector<std::byte> got(want.size());
        reader.read(first_of(k) + r, got);
        if (test::as_string(got) != want) bad.fetch_add(1);
      }
    });
  for (auto& t : pool) t.join();
  CHECK(bad.load() == 0);
  CHECK(src.shards_opened() == shard_count);
  CHECK(fds_under(set.real) == shard_count);
}

TEST_CASE("lmdb lazy: an epoch through the loader delivers every record once, bytes equal") {
  test::temp_dir dir("lmepoch");
  const auto set = write_shards(dir.path(), true);
  const lmdb_source src(set.paths);
  REQUIRE(src.shards_opened() == 1);
  loader_config c;
  c.batch_size = 7;
  c.order = sample_order::shuffled;
  c.seed = 11;
  c.part = partition{};
  c.epochs = 1;
  c.workers = 3;
  loader<lmdb_source> l(src, c);
  std::vector<int> seen(static_cast<std::size_t>(src.size()), 0);
  for (auto& b : l.epoch())
    for (std::size_t j = 0; j < b.size(); ++j) {
      const std::uint64_t i = b.indices()[j];
      int k = 0;
      while (first_of(k + 1) <= i) ++k;
      CHECK(test::as_string(b.record(j)) == value(k, i - first_of(k)));
      ++seen[static_cast<std::size_t>(i)];
    }
  for (const int n : seen) CHECK(n == 1);
  CHECK(src.shards_opened() == shard_count);
}

TEST_CASE("lmdb: the map base from the key's page agrees with /proc/self/maps") {
  // Lazy opens confirm the base with one stat of /proc/self/map_files; /proc/self/maps is the
  // fallback where that fails: both must name the same base.
  test::temp_dir dir("lmbase");
  const auto set = write_shards(dir.path(), false);
  for (int k : {0, 5}) {
    const auto t = detail::lmdb::open_table(set.paths[static_cast<std::size_t>(k)], 0, false,
                                            true, 8);
    REQUIRE(t->s.valid.known());
    const std::byte* in_map = t->s.valid.base + t->value_offset(0);
    CHECK(detail::lmdb::map_base_of(detail::lmdb::file_mappings(), in_map, t->s.map_size) ==
          t->s.valid.base);
    CHECK(detail::lmdb::map_base_direct(in_map, t->s.psize, t->s.map_size, t->s.fd) ==
          t->s.valid.base);
  }
}
