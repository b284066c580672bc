// The node-local cache of remote bytes (include/gpufeed/detail/remote/local_cache*.hpp) over the
// in-memory byte source: reads equal the object's bytes wherever they fall; a second pass reads
// nothing from the object when the budget holds it; a smaller budget holds on disk and still
// saves reads; a block damaged on disk (its data, its header, cut short) is detected, dropped
// and fetched again, never delivered; a temporary file a crashed writer left is never read; an
// object with a new validator drops the old version's blocks; two processes reading through one
// directory at once, with and without eviction, both get the object's bytes, and so do threads of
// one process (each block fetched once); the object's
// failure is the read's error; the settings (options, environment, byte counts) and their errors.
#include <doctest/doctest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "env_guard.hpp"
#include "gpufeed/detail/remote/local_cache_source.hpp"
#include "gpufeed/error.hpp"
#include "memory_bytes.hpp"
#include "test_util.hpp"

using namespace gpufeed::detail::remote;
using gpufeed::test::memory_bytes;
using gpufeed::test::temp_dir;
namespace fs = std::filesystem;

namespace {

constexpr std::size_t block = 64 * 1024;  // the smallest block: many blocks in a small object

std::vector<std::byte> bytes_of(std::size_t n, unsigned seed) {
  std::vector<std::byte> b(n);
  std::mt19937 rng(seed);
  for (auto& x : b) x = static_cast<std::byte>(rng());
  return b;
}

cache_config config_in(const fs::path& dir, std::uint64_t max_bytes) {
  cache_config c;
  c.directory = dir;
  c.max_bytes = max_bytes;
  c.block_bytes = block;
  return c;
}

// A source over `data` through a cache at `c` (its own local_cache: as another process has).
struct cached {
  memory_bytes* object;
  std::unique_ptr<local_cache_source> source;
  cached(const std::vector<std::byte>& data, const cache_config& c, const std::string& validator,
         std::shared_ptr<local_cache> cache = nullptr) {
    auto m = std::make_unique<memory_bytes>(data, "http://host/object.h5");
    object = m.get();
    source = std::make_unique<local_cache_source>(std::move(m), "http://host/object.h5", validator,
                                                  cache ? cache : std::make_shared<local_cache>(c));
  }
};

// Reads the whole object in pieces of `piece` bytes in a shuffled order: the bytes wrong.
std::size_t read_all(const local_cache_source& s, const std::vector<std::byte>& want,
                     std::size_t piece, unsigned seed) {
  std::vector<std::uint64_t> starts;
  for (std::uint64_t at = 0; at < want.size(); at += piece) starts.push_back(at);
  std::shuffle(starts.begin(), starts.end(), std::mt19937(seed));
  std::size_t wrong = 0;
  std::vector<std::byte> got;
  for (const std::uint64_t at : starts) {
    const std::size_t n = std::min<std::size_t>(piece, want.size() - at);
    got.assign(n, std::byte{0});
    s.read_exact(got.data(), n, at);
    if (!std::equal(got.begin(), got.end(), want.begin() + static_cast<std::ptrdiff_t>(at))) ++wrong;
  }
  return wrong;
}

// Bytes of the block files under the cache directory, and their number.
std::uint64_t bytes_on_disk(const fs::path& dir, std::size_t* files = nullptr) {
  std::uint64_t total = 0;
  std::size_t n = 0;
  std::error_code ec;  // another process may remove files and folders meanwhile
  for (fs::recursive_directory_iterator it(dir / "v1" / "objects", ec), end; !ec && it != end;
       it.increment(ec)) {
    if (it->path().extension() != ".blk") continue;
    std::error_code size_ec;
    const auto size = fs::file_size(it->path(), size_ec);
    if (size_ec) continue;
    total += size;
    ++n;
  }
  if (files) *files = n;
  return total;
}

void flip_byte(const fs::path& p, std::uint64_t at) {
  std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(static_cast<std::streamoff>(at));
  char c = 0;
  f.get(c);
  f.seekp(static_cast<std::streamoff>(at));
  f.put(static_cast<char>(c ^ 0x5A));
}

}  // namespace

TEST_CASE("local cache: reads equal the object; a second pass reads nothing from it") {
  temp_dir dir("lcache");
  const auto data = bytes_of(10 * block + 12345, 1);
  cached c(data, config_in(dir.path(), 64 * block), "etag:\"a\"");
  CHECK(read_all(*c.source, data, 3000, 1) == 0);  // pieces across block boundaries
  const long first = c.object->reads();
  CHECK(first == 11);  // each block fetched once: one read of the object a block
  CHECK(c.source->stats().misses == 11);
  CHECK(read_all(*c.source, data, 7777, 2) == 0);
  CHECK(read_all(*c.source, data, data.size(), 3) == 0);  // one read across every block
  CHECK(c.object->reads() == first);
  const cache_stats s = c.source->stats();
  REQUIRE(cache_stats_of(*c.source).has_value());
  CHECK(cache_stats_of(*c.source)->hits == s.hits);
  CHECK_FALSE(cache_stats_of(*c.object).has_value());
  cache_stats sum = s;
  sum += s;
  CHECK(sum.bytes_fetched == 2 * s.bytes_fetched);
  CHECK(s.hits > 0);
  CHECK(s.corrupt == 0);
  CHECK(s.bytes_fetched == data.size());

  // Another process (its own local_cache) finds the blocks too.
  cached other(data, config_in(dir.path(), 64 * block), "etag:\"a\"");
  CHECK(read_all(*other.source, data, 5000, 4) == 0);
  CHECK(other.object->reads() == 0);
}

TEST_CASE("local cache admission: objects being read are kept; a declined store pauses storing") {
  cache_admission a;
  CHECK_FALSE(a.kept("objects/u/v"));
  a.reading("objects/u/v");
  a.reading("objects/u/v");  // two readers of one object
  a.done_reading("objects/u/v");
  CHECK(a.kept("objects/u/v"));
  CHECK_FALSE(a.kept("objects/u/w"));
  CHECK(a.admits());
  a.declined();
  CHECK_FALSE(a.admits());
  a.stored();  // resets the next wait only: this one still runs
  CHECK_FALSE(a.admits());
  a.done_reading("objects/u/v");  // the last reader: its blocks may make room now
  CHECK_FALSE(a.kept("objects/u/v"));
  CHECK(a.admits());
}

TEST_CASE("local cache: a budget smaller than the object keeps a fixed part of it, read locally every pass") {
  temp_dir dir("lcache");
  const auto data = bytes_of(40 * block, 2);
  const std::uint64_t budget = 12 * (block + cache_header_bytes);
  auto cache = std::make_shared<local_cache>(config_in(dir.path(), budget));
  cached c(data, cache->config(), "etag:\"b\"", cache);
  std::uint64_t peak = 0;
  std::vector<cache_stats> after;
  for (int pass = 0; pass < 3; ++pass) {
    std::vector<std::byte> got(1000);
    for (std::uint64_t at = 0; at + got.size() <= data.size(); at += 4096) {
      c.source->read_exact(got.data(), got.size(), at);
      CHECK(std::equal(got.begin(), got.end(), data.begin() + static_cast<std::ptrdiff_t>(at)));
      peak = std::max(peak, bytes_on_disk(dir.path()));
    }
    after.push_back(c.source->stats());
  }
  CHECK(peak <= budget);
  // LRU would evict every block before its next pass reads it; the blocks this source reads are
  // never evicted for each other: the first 12 stay, the rest are declined once.
  CHECK(cache->stats().evictions == 0);
  CHECK(cache->stats().declined >= 1);
  CHECK_FALSE(cache->admits());
  std::size_t files = 0;
  (void)bytes_on_disk(dir.path(), &files);
  CHECK(files == 12);
  // Passes 2 and 3: 16 reads of each kept block from the cache; the others read as asked (1000
  // bytes each, never whole blocks), the same every pass.
  for (int pass = 1; pass < 3; ++pass) {
    INFO("pass " << pass + 1);
    CHECK(after[pass].hits - after[pass - 1].hits == 12 * 16);
    CHECK(after[pass].bytes_fetched - after[pass - 1].bytes_fetched == 28 * 16 * 1000);
  }

  // The directory opened again with a smaller budget is trimmed to it.
  const local_cache smaller(config_in(dir.path(), budget / 2));
  CHECK(bytes_on_disk(dir.path()) <= budget / 2);
  CHECK(smaller.stats().evictions > 0);
}

TEST_CASE("local cache: blocks of objects no longer read are evicted, least recently used first") {
  temp_dir dir("lcache");
  const auto old_data = bytes_of(10 * block, 3), data = bytes_of(10 * block, 4);
  const std::uint64_t budget = 12 * (block + cache_header_bytes);
  auto cache = std::make_shared<local_cache>(config_in(dir.path(), budget));
  {
    auto m = std::make_unique<memory_bytes>(old_data, "http://host/old.h5");
    const local_cache_source old(std::move(m), "http://host/old.h5", "etag:\"o\"", cache);
    CHECK(read_all(old, old_data, 5000, 1) == 0);
  }
  CHECK(cache->stats().evictions == 0);
  cached c(data, cache->config(), "etag:\"n\"", cache);
  CHECK(read_all(*c.source, data, 5000, 2) == 0);
  CHECK(cache->stats().evictions > 0);  // the old object's blocks made room
  CHECK(cache->stats().declined == 0);
  CHECK(bytes_on_disk(dir.path()) <= budget);
  const long fetched = c.object->reads();
  CHECK(read_all(*c.source, data, 3000, 3) == 0);
  CHECK(c.object->reads() == fetched);  // every block of the object being read was kept
}

TEST_CASE("local cache: a damaged block is dropped and fetched again, never delivered") {
  temp_dir dir("lcache");
  const auto data = bytes_of(4 * block, 3);
  const cache_config config = config_in(dir.path(), 64 * block);
  cached first(data, config, "etag:\"c\"");
  CHECK(read_all(*first.source, data, block, 1) == 0);
  const fs::path p = first.source->cache().block_path(first.source->key(), 2);
  REQUIRE(fs::exists(p));
  // Each damage is met by this process (its block files kept open: the pages are checked
  // against the header read at open) and by another one (its own cache: the header read anew).
  auto damage = [&](const char* how, cached& c) {
    INFO(how);
    const long before = c.object->reads();
    const auto corrupt = c.source->stats().corrupt;
    CHECK(read_all(*c.source, data, 1000, 7) == 0);
    CHECK(c.source->stats().corrupt == corrupt + 1);
    CHECK(c.object->reads() == before + 1);  // block 2 fetched again, once
    CHECK(read_all(*c.source, data, 1000, 8) == 0);
    CHECK(c.object->reads() == before + 1);  // and stored again, intact
  };
  flip_byte(p, cache_header_bytes + 40000);  // a byte of the data
  damage("data", first);
  flip_byte(p, cache_header_bytes + 3);
  cached second(data, config, "etag:\"c\"");
  damage("data, another process", second);
  flip_byte(p, 20);  // the header's fields
  cached third(data, config, "etag:\"c\"");
  damage("header, another process", third);
  fs::resize_file(p, cache_header_bytes + 100);  // a torn write made visible (a power loss)
  damage("cut short", third);
  { std::ofstream(p, std::ios::trunc | std::ios::binary); }  // empty
  damage("empty", third);
  cached fourth(data, config, "etag:\"c\"");
  { std::ofstream(p, std::ios::trunc | std::ios::binary); }
  damage("empty, another process", fourth);
}

TEST_CASE("local cache: processes with other block sizes share a directory apart") {
  temp_dir dir("lcache");
  const auto data = bytes_of(5 * block, 11);  // block 1 of 256 KiB and of 64 KiB: 64 KiB each
  cache_config big = config_in(dir.path(), 64 * block);
  big.block_bytes = 4 * block;
  cached a(data, big, "etag:\"s\"");
  cached b(data, config_in(dir.path(), 64 * block), "etag:\"s\"");
  for (int pass = 0; pass < 2; ++pass) {
    CHECK(read_all(*a.source, data, 3000, 1) == 0);
    CHECK(read_all(*b.source, data, 3000, 2) == 0);
  }
  CHECK(a.object->reads() == 2);
  CHECK(b.object->reads() == 5);
  CHECK(a.source->stats().corrupt + b.source->stats().corrupt == 0);
}

TEST_CASE("local cache: a crashed writer's temporary file is never read") {
  temp_dir dir("lcache");
  const auto data = bytes_of(3 * block, 4);
  cached c(data, config_in(dir.path(), 64 * block), "etag:\"d\"");
  const auto image = encode_cache_block(std::span(data).subspan(0, block / 2), data.size(), 0);
  { std::ofstream(dir / "v1/tmp/half.tmp", std::ios::binary).write(
        reinterpret_cast<const char*>(image.data()), static_cast<std::streamsize>(image.size())); }
  CHECK(read_all(*c.source, data, 4096, 2) == 0);
  CHECK(c.object->reads() == 3);
  // Once it is old enough that no live writer can own it, the next open removes it.
  const auto t = fs::last_write_time(dir / "v1/tmp/half.tmp");
  fs::last_write_time(dir / "v1/tmp/half.tmp", t - std::chrono::hours(1));
  const local_cache again(config_in(dir.path(), 64 * block));
  CHECK_FALSE(fs::exists(dir / "v1/tmp/half.tmp"));
}

TEST_CASE("local cache: an object with a new ETag is never served its old blocks") {
  temp_dir dir("lcache");
  const auto old_bytes = bytes_of(5 * block, 5);
  const auto new_bytes = bytes_of(5 * block, 6);  // same size, other bytes
  auto cache = std::make_shared<local_cache>(config_in(dir.path(), 64 * block));
  {
    cached c(old_bytes, cache->config(), "etag:\"v1\"", cache);
    CHECK(read_all(*c.source, old_bytes, 10000, 1) == 0);
  }
  std::size_t files = 0;
  CHECK(bytes_on_disk(dir.path(), &files) > 0);
  CHECK(files == 5);
  cached c(new_bytes, cache->config(), "etag:\"v2\"", cache);
  CHECK(cache->stats().invalidated == 5);  // the old version's blocks are gone
  CHECK(read_all(*c.source, new_bytes, 10000, 2) == 0);
  CHECK(c.object->reads() == 5);
  CHECK(bytes_on_disk(dir.path(), &files) > 0);
  CHECK(files == 5);
}

TEST_CASE("local cache: two processes read one object through one directory at once") {
  const auto data = bytes_of(24 * block + 999, 7);
  const std::uint64_t small = 8 * (block + cache_header_bytes);
  for (const std::uint64_t budget : {std::uint64_t{64} * block, small}) {
    // Each child its own cache; or both reading through the source the parent opened before it
    // forked (the children then share its index's open file: each opens its own for the lock),
    // the parent reading too.
    for (const bool inherited : {false, true}) {
      temp_dir dir("lcache");
      INFO("budget " << budget << (inherited ? ", the parent's source" : ", their own"));
      std::optional<cached> parents;
      if (inherited) parents.emplace(data, config_in(dir.path(), budget), "etag:\"p\"");
      std::vector<pid_t> kids;
      for (unsigned k = 0; k < 2; ++k) {
        const pid_t pid = ::fork();
        REQUIRE(pid >= 0);
        if (pid == 0) {  // the child reads twice in its own order; its exit status says how
          int status = 0;
          try {
            std::optional<cached> own;
            if (!inherited) own.emplace(data, config_in(dir.path(), budget), "etag:\"p\"");
            const local_cache_source& s = inherited ? *parents->source : *own->source;
            for (unsigned pass = 0; pass < 2; ++pass)
              if (read_all(s, data, 2500, 10 * k + pass) != 0) status = 1;
            if (bytes_on_disk(dir.path()) > budget) status = 2;
          } catch (...) {
            status = 3;
          }
          ::_exit(status);
        }
        kids.push_back(pid);
      }
      if (inherited) CHECK(read_all(*parents->source, data, 3500, 99) == 0);
      for (const pid_t pid : kids) {
        int status = -1;
        REQUIRE(::waitpid(pid, &status, 0) == pid);
        CHECK(WIFEXITED(status));
        CHECK(WEXITSTATUS(status) == 0);
      }
      CHECK(bytes_on_disk(dir.path()) <= budget);
      CHECK(fs::is_empty(dir / "v1/tmp"));
    }
  }
}

TEST_CASE("local cache: threads reading at once share each block's fetch") {
  const auto data = bytes_of(16 * block + 77, 9);
  for (const std::uint64_t budget : {std::uint64_t{64} * block, 6 * (block + cache_header_bytes)}) {
    temp_dir dir("lcache");
    INFO("budget " << budget);
    cached c(data, config_in(dir.path(), budget), "etag:\"t\"");
    std::atomic<std::size_t> wrong{0};
    std::vector<std::thread> threads;
    for (unsigned k = 0; k < 4; ++k)
      threads.emplace_back([&, k] { wrong += read_all(*c.source, data, 1500 + 500 * k, k); });
    for (auto& t : threads) t.join();
    CHECK(wrong == 0);
    CHECK(bytes_on_disk(dir.path()) <= budget);
    if (budget == 64 * block) CHECK(c.object->reads() == 17);  // each block fetched once
  }
}

TEST_CASE("local cache: the object's failure is the read's error, nothing cached") {
  temp_dir dir("lcache");
  const auto data = bytes_of(2 * block, 8);
  cached c(data, config_in(dir.path(), 64 * block), "etag:\"e\"");
  c.object->fail_with(EIO);
  std::vector<std::byte> got(100);
  CHECK_THROWS_AS(c.source->read_exact(got.data(), got.size(), 10), gpufeed::io_error);
  CHECK(bytes_on_disk(dir.path()) == 0);
  c.object->fail_with(0);
  c.source->read_exact(got.data(), got.size(), 10);
  CHECK(std::equal(got.begin(), got.end(), data.begin() + 10));
}

TEST_CASE("local cache: keys hold no credential and survive a URL's re-signing") {
  CHECK(cache_key_url("https://user:pw@host/a/b.h5?versionId=3&X-Amz-Signature=abc&"
                      "X-Amz-Date=20250101T000000Z&X-Amz-Credential=AKIA%2Fx&token=t#frag") ==
        "https://***@host/a/b.h5?versionId=3");
  CHECK(cache_key_url("https://host/b.h5?Expires=1&AWSAccessKeyId=A&Signature=s") ==
        "https://host/b.h5");
  CHECK(cache_key_url("http://host/b.h5") == "http://host/b.h5");
  const cache_key a = make_cache_key(cache_key_url("https://host/b.h5?X-Amz-Date=1"), "e", 10);
  const cache_key b = make_cache_key(cache_key_url("https://host/b.h5?X-Amz-Date=2"), "e", 10);
  CHECK(a.url == b.url);
  CHECK(a.version == b.version);
  CHECK(make_cache_key("https://host/b.h5?id=1", "e", 10).url !=
        make_cache_key("https://host/b.h5?id=2", "e", 10).url);
  CHECK(make_cache_key("u", "e", 10).version != make_cache_key("u", "f", 10).version);
  CHECK(make_cache_key("u", "e", 10).version != make_cache_key("u", "e", 11).version);
}

TEST_CASE("local cache: settings from options and the environment") {
  gpufeed::test::env_guard env;
  env.unset("GPUFEED_REMOTE_CACHE_DIR");
  env.unset("GPUFEED_REMOTE_CACHE_BYTES");
  CHECK(parse_byte_count("1048576") == 1048576u);
  CHECK(parse_byte_count("64G") == std::uint64_t{64} << 30);
  CHECK(parse_byte_count("512m") == std::uint64_t{512} << 20);
  CHECK_FALSE(parse_byte_count("").has_value());
  CHECK_FALSE(parse_byte_count("12GB").has_value());
  CHECK_FALSE(parse_byte_count("G").has_value());
  CHECK_FALSE(parse_byte_count("99999999999999999999").has_value());

  CHECK_FALSE(resolve_cache_config({}, 0, default_cache_block_bytes).has_value());
  const auto c = resolve_cache_config("/tmp/x", std::uint64_t{1} << 30, default_cache_block_bytes);
  REQUIRE(c.has_value());
  CHECK(c->directory == fs::path("/tmp/x"));
  CHECK_THROWS_AS((void)resolve_cache_config("/tmp/x", 0, default_cache_block_bytes),
                  gpufeed::config_error);
  CHECK_THROWS_AS((void)resolve_cache_config("/tmp/x", std::uint64_t{1} << 30, 3 << 20),
                  gpufeed::config_error);
  CHECK_THROWS_AS((void)resolve_cache_config("/tmp/x", 8 << 20, default_cache_block_bytes),
                  gpufeed::config_error);

  // A directory that cannot be made (a file is in the way): an io_error naming it.
  temp_dir dir("lcache");
  { std::ofstream(dir / "file") << "x"; }
  try {
    local_cache bad(config_in(dir / "file" / "cache", 64 * block));
    FAIL("no error");
  } catch (const gpufeed::io_error& e) {
    CHECK(std::string(e.what()).find((dir / "file" / "cache").string()) != std::string::npos);
  }

  env.set("GPUFEED_REMOTE_CACHE_DIR", "/tmp/y");
  env.set("GPUFEED_REMOTE_CACHE_BYTES", "2G");
  const auto e = resolve_cache_config({}, 0, default_cache_block_bytes);
  REQUIRE(e.has_value());
  CHECK(e->directory == fs::path("/tmp/y"));
  CHECK(e->max_bytes == std::uint64_t{2} << 30);
  env.set("GPUFEED_REMOTE_CACHE_BYTES", "lots");
  CHECK_THROWS_AS((void)resolve_cache_config({}, 0, default_cache_block_bytes),
                  gpufeed::config_error);
}
