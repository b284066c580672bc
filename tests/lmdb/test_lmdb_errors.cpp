// lmdb_source on bad input: every failure is a typed gpufeed error naming the file (and the
// record where there is one) — never a crash, a hang or a wrong byte.
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "gpufeed/lmdb_source.hpp"
#include "lmdb_test_util.hpp"
#include "test_util.hpp"

using namespace gpufeed;
using namespace gpufeed::test;
namespace fs = std::filesystem;

namespace {

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}
void spit(const fs::path& p, const std::string& s) {
  fs::create_directories(p.parent_path());
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(s.data(), static_cast<std::streamsize>(s.size()));
}

// Opens (and reads every record of) path; returns the error it threw, checked to be of type E.
template <class E>
E open_fails(const fs::path& path, lmdb_options o = {}) {
  try {
    const lmdb_source s(path, o);
    std::vector<std::byte> buf(s.max_record_size());
    for (std::uint64_t i = 0; i < s.size(); ++i) s.read(i, buf);
  } catch (const E& e) {
    return e;
  } catch (const gpufeed::error& e) {
    FAIL("wrong error type: " << e.what());
  }
  FAIL("no error for " << path);
  throw;  // unreachable
}

// Opens the shard and reads every record. nullopt: a typed error (naming the file) was thrown.
// Otherwise the records that differ from `kv` (kv[i] is record i) with no error: silent changes,
// a record count that differs counting as one per missing or extra record.
std::optional<std::size_t> silent_changes(const fs::path& path, const kv_list& kv) {
  try {
    const lmdb_source s(path);
    std::size_t changed = s.size() > kv.size() ? s.size() - kv.size() : kv.size() - s.size();
    std::vector<std::byte> buf(s.max_record_size());
    for (std::uint64_t i = 0; i < s.size(); ++i) {
      const std::size_t n = s.record_size(i);
      REQUIRE(n <= buf.size());
      s.read(i, std::span(buf).first(n));
      if (i >= kv.size()) continue;
      const std::string& want = kv[static_cast<std::size_t>(i)].second;
      changed += n != want.size() || std::memcmp(buf.data(), want.data(), n) != 0;
    }
    return changed;
  } catch (const gpufeed::error& e) {
    CHECK_MESSAGE(!e.file().empty(), e.what());
    return std::nullopt;
  }
}

kv_list sample(int n, std::size_t size, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  kv_list kv;
  for (int i = 0; i < n; ++i) kv.emplace_back(key8(static_cast<std::uint64_t>(i)), random_bytes(rng, size));
  return kv;
}

lmdb_options mutable_shards() {
  lmdb_options o;
  o.immutable = false;
  return o;
}

}  // namespace

TEST_CASE("bad arguments are config_error") {
  CHECK_THROWS_AS(lmdb_source(std::vector<fs::path>{}), config_error);
  temp_dir dir("lmdb-args");
  write_lmdb(dir.path(), sample(3, 10, 1));
  lmdb_options o;
  o.max_readers = 0;
  CHECK_THROWS_AS(lmdb_source(dir.path(), o), config_error);
}

TEST_CASE("paths that are not LMDB environments") {
  temp_dir dir("lmdb-notenv");
  SUBCASE("missing path: io_error") {
    const auto e = open_fails<io_error>(dir / "nope");
    CHECK(e.file() == (dir / "nope").string());
    CHECK(e.status() == ENOENT);
  }
  SUBCASE("a directory without data.mdb: format_error naming the directory") {
    fs::create_directories(dir / "empty");
    const auto e = open_fails<format_error>(dir / "empty");
    CHECK(e.file() == (dir / "empty").string());
    CHECK(e.message().find("no data.mdb") != std::string::npos);
  }
  SUBCASE("empty, short and garbage data.mdb files: format_error naming data.mdb") {
    std::mt19937_64 rng(2);
    for (const std::string& content :
         {std::string(), std::string("hello"), random_bytes(rng, 100), random_bytes(rng, 4096),
          random_bytes(rng, 65536), std::string(65536, '\0')}) {
      CAPTURE(content.size());
      spit(dir / "g" / "data.mdb", content);
      for (bool immutable : {true, false}) {
        lmdb_options o;
        o.immutable = immutable;
        const auto e = open_fails<format_error>(dir / "g", o);
        CHECK(e.file() == (dir / "g" / "data.mdb").string());
        CHECK(e.message().find("not an LMDB environment") != std::string::npos);
      }
    }
  }
  SUBCASE("a garbage file given as a NOSUBDIR environment") {
    spit(dir / "file.lmdb", std::string(9000, 'x'));
    CHECK(open_fails<format_error>(dir / "file.lmdb").file() == (dir / "file.lmdb").string());
  }
}

TEST_CASE("damaged meta pages are refused before LMDB maps them") {
  temp_dir dir("lmdb-meta");
  write_lmdb(dir / "ok", sample(50, 3000, 3));
  const std::string good = slurp(dir / "ok" / "data.mdb");
  struct damage {
    std::size_t offset;
    std::string bytes;
    const char* why;
  };
  // Offsets inside the meta page that follows the 16-byte page header (meta 1 starts at 4096).
  for (const damage& d : std::vector<damage>{{16, std::string("\x01\x02\x03\x04", 4), "magic"},
                                             {4096 + 16, std::string(4, '\0'), "magic"},
                                             {20, std::string("\x07\x00\x00\x00", 4), "version"},
                                             {4096 + 40, std::string("\x00\x00\x10\x00", 4), "page size"},
                                             {40, std::string("\x00\x20\x00\x00", 4), "magic"},
                                             {4096 + 10, std::string("\x02\x00", 2), "meta page"}}) {
    CAPTURE(d.offset);
    std::string bad = good;
    bad.replace(d.offset, d.bytes.size(), d.bytes);
    spit(dir / "bad" / "data.mdb", bad);
    const auto e = open_fails<format_error>(dir / "bad");
    CHECK(e.file() == (dir / "bad" / "data.mdb").string());
    CHECK_MESSAGE(e.message().find(d.why) != std::string::npos, e.message());
  }
}

TEST_CASE("truncated data.mdb: a typed error at every length, never SIGBUS") {
  temp_dir dir("lmdb-trunc");
  write_lmdb(dir / "ok", sample(60, 5000, 4));
  const std::string good = slurp(dir / "ok" / "data.mdb");
  const fs::path data = dir / "t" / "data.mdb";
  for (std::size_t n = 0; n < good.size(); n += (n % 4096 == 0 ? 1 : 4095)) {
    CAPTURE(n);
    spit(data, good.substr(0, n));
    for (bool immutable : {true, false}) {
      lmdb_options o;
      o.immutable = immutable;
      fs::remove(dir / "t" / "lock.mdb");
      try {
        const lmdb_source s(dir / "t", o);
        FAIL("opened a truncated file");
      } catch (const corrupt_error& e) {
        CHECK(e.file() == data.string());
        CHECK(e.message().find("truncated") != std::string::npos);
      } catch (const format_error& e) {  // shorter than the two meta pages
        CHECK(n < 8192);
        CHECK(e.file() == data.string());
      }
    }
  }
}

TEST_CASE("damaged B-tree pages of immutable shards: a typed error, never a crash") {
  temp_dir dir("lmdb-pages");
  const kv_list kv = sample(300, 2500, 5);  // overflow values, a two-level tree
  write_lmdb(dir / "ok", kv);
  const std::string good = slurp(dir / "ok" / "data.mdb");
  const fs::path data = dir / "bad" / "data.mdb";
  SUBCASE("a leaf page turned into a branch page") {
    std::string bad = good;
    std::size_t leaf = 0;
    for (std::size_t p = 2; p * 4096 < bad.size() && !leaf; ++p)
      if (bad[p * 4096 + 10] == '\x02') leaf = p;
    REQUIRE(leaf != 0);
    bad[leaf * 4096 + 10] = '\x01';
    spit(data, bad);
    const auto e = open_fails<corrupt_error>(dir / "bad");
    CHECK(e.file() == data.string());
    CHECK(e.message().find("damaged LMDB B-tree") != std::string::npos);
  }
  SUBCASE("a changed byte of a value: not detectable without checksums, and counted as such") {
    std::string bad = good;
    std::size_t overflow = 0;  // LMDB's overflow pages (0x04) hold the 2500-byte values
    for (std::size_t p = 2; p * 4096 < bad.size() && !overflow; ++p)
      if (bad[p * 4096 + 10] == '\x04') overflow = p;
    REQUIRE(overflow != 0);
    bad[overflow * 4096 + 16 + 100] ^= '\x01';  // a byte of the value, past the page header
    spit(data, bad);
    const auto changed = silent_changes(dir / "bad", kv);
    REQUIRE(changed);
    CHECK(*changed == 1);
  }
  SUBCASE("random damage to branch and leaf pages: opens, or throws a typed error") {
    std::mt19937_64 rng(6);
    std::vector<std::size_t> tree_pages;  // LMDB's branch (0x01) and leaf (0x02) pages
    for (std::size_t p = 2; p * 4096 < good.size(); ++p)
      if (good[p * 4096 + 10] == '\x01' || good[p * 4096 + 10] == '\x02') tree_pages.push_back(p);
    REQUIRE(tree_pages.size() >= 3);
    // LMDB keeps no checksums: damage to a value's bytes, or to a key, reads back as other bytes.
    // What gpufeed's structure checks promise: a page whose structure is damaged (noise over the
    // whole page) is refused with a typed error; the rest may open, and the records that then read
    // back different from what was written, without an error, are counted and reported.
    int opened = 0, noise_opened = 0;
    std::size_t silent = 0, silent_files = 0;
    for (int t = 0; t < 45; ++t) {
      CAPTURE(t);
      std::string bad = good;
      const std::size_t p = tree_pages[rng() % tree_pages.size()] * 4096;
      if (t % 3 == 0) {  // a whole page of noise
        for (std::size_t b = 0; b < 4096; ++b) bad[p + b] = static_cast<char>(rng());
      } else if (t % 3 == 1) {  // a few bytes of the page header and node offsets
        for (int k = 0; k < 4; ++k) bad[p + rng() % 64] = static_cast<char>(rng());
      } else {  // a few bytes anywhere in the page
        for (int k = 0; k < 4; ++k) bad[p + rng() % 4096] = static_cast<char>(rng());
      }
      spit(data, bad);
      const auto changed = silent_changes(dir / "bad", kv);
      if (!changed) continue;
      ++opened;
      noise_opened += t % 3 == 0;
      silent += *changed;
      silent_files += *changed > 0;
    }
    CHECK(noise_opened == 0);
    CHECK(opened < 45);
    MESSAGE("random damage to tree pages: " << 45 - opened << " of 45 files refused with a typed "
            "error; " << opened << " opened, " << silent_files << " of them with " << silent
            << " records silently changed (LMDB has no checksums)");
  }
}

TEST_CASE("a value whose size points past the end of the file is refused at open") {
  temp_dir dir("lmdb-ovf");
  const kv_list kv = sample(40, 10000, 7);
  write_lmdb(dir / "ok", kv);
  std::string bad = slurp(dir / "ok" / "data.mdb");
  // The leaf node of key 00000005: header lo u16 | hi u16 | flags u16 | ksize u16, key, then the
  // overflow page number (F_BIGDATA).
  const std::size_t at = bad.find(std::string("\x08\x00" "00000005", 10));
  REQUIRE(at != std::string::npos);
  const std::size_t node = at - 6;
  REQUIRE((static_cast<unsigned char>(bad[node + 4]) & 1u) == 1u);  // F_BIGDATA
  std::uint64_t ovpg = 0;
  std::memcpy(&ovpg, bad.data() + node + 8 + 8, 8);
  const std::size_t value_at = ovpg * 4096 + 16;
  for (std::size_t size : {bad.size() - value_at + 1, std::size_t{0xfffffff0}}) {
    CAPTURE(size);
    std::string b = bad;
    const auto lo = static_cast<std::uint16_t>(size & 0xffff);
    const auto hi = static_cast<std::uint16_t>(size >> 16);
    std::memcpy(b.data() + node, &lo, 2);
    std::memcpy(b.data() + node + 2, &hi, 2);
    spit(dir / "bad" / "data.mdb", b);
    const auto e = open_fails<corrupt_error>(dir / "bad");
    CHECK(e.file() == (dir / "bad" / "data.mdb").string());
    CHECK(e.record() == 5u);
    CHECK(e.message().find("outside data.mdb") != std::string::npos);
  }
}

TEST_CASE("empty databases, duplicate keys and values that are not Datums") {
  temp_dir dir("lmdb-content");
  SUBCASE("empty database: format_error") {
    write_lmdb(dir / "empty", {});
    for (bool immutable : {true, false}) {
      lmdb_options o;
      o.immutable = immutable;
      const auto e = open_fails<format_error>(dir / "empty", o);
      CHECK(e.file() == (dir / "empty" / "data.mdb").string());
      CHECK(e.message().find("empty") != std::string::npos);
    }
  }
  SUBCASE("MDB_DUPSORT: unsupported_error") {
    lmdb_write_options w;
    w.db_flags = MDB_DUPSORT;
    write_lmdb(dir / "dup", {{"a", "1"}, {"a", "2"}, {"b", "3"}}, w);
    CHECK(open_fails<unsupported_error>(dir / "dup").file() == (dir / "dup" / "data.mdb").string());
  }
  SUBCASE("a value that is not a Datum: format_error naming the shard and the global record") {
    write_lmdb(dir / "s0", {{"a", caffe_datum(1, 1, 1, "x", 0)}, {"b", caffe_datum(1, 1, 1, "y", 1)}});
    write_lmdb(dir / "s1", {{"a", caffe_datum(1, 1, 1, "z", 2)}, {"b", "\x22\x05" "abc"}});
    lmdb_options o;
    o.format = lmdb_options::value_format::datum;
    try {
      const lmdb_source s(std::vector<fs::path>{dir / "s0", dir / "s1"}, o);
      FAIL("accepted a value that is not a Datum");
    } catch (const format_error& e) {
      CHECK(e.file() == (dir / "s1" / "data.mdb").string());
      CHECK(e.record() == 3u);
      CHECK(e.message().find("value is not a Caffe Datum") != std::string::npos);
    }
    // As raw values the same shards are fine.
    CHECK(lmdb_source(std::vector<fs::path>{dir / "s0", dir / "s1"}).size() == 4);
  }
}

TEST_CASE("mutable shards changed after open: corrupt_error naming the file and the record") {
  temp_dir dir("lmdb-changed");
  lmdb_write_options w;
  w.map_size = 64 << 20;
  write_lmdb(dir.path(), sample(20, 100, 8), w);
  const lmdb_source s(dir.path(), mutable_shards());
  auto r = s.make_reader();
  std::vector<std::byte> buf(200);
  r.read(3, buf);
  r.idle();  // a new snapshot on the next read sees the writer's commits
  write_lmdb(dir.path(), {{key8(3), std::string(150, 'n')}}, w);  // same key, new size
  delete_key(dir.path(), key8(4));
  const std::string data = (dir.path() / "data.mdb").string();
  try {
    r.read(3, buf);
    FAIL("no error for a resized value");
  } catch (const corrupt_error& e) {
    CHECK(e.file() == data);
    CHECK(e.record() == 3u);
    CHECK(e.message().find("key '00000003'") != std::string::npos);
  }
  try {
    s.read(4, buf);
    FAIL("no error for a deleted key");
  } catch (const corrupt_error& e) {
    CHECK(e.file() == data);
    CHECK(e.record() == 4u);
    CHECK(e.message().find("no longer in the database") != std::string::npos);
  }
  r.read(5, buf);  // the reader recovers after an error
  s.read(5, buf);
}

TEST_CASE("a source is not used across fork()") {
  temp_dir dir("lmdb-fork");
  write_lmdb(dir.path(), sample(5, 10, 9));
  const lmdb_source s(dir.path());
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    int code = 1;
    try {
      (void)s.make_reader();
    } catch (const config_error&) {
      code = 0;
    } catch (...) {
      code = 2;
    }
    ::_exit(code);
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  (void)s.make_reader();  // fine in the process that opened it
}
