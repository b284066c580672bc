// lmdb_source under concurrency: 16 threads reading random records through their own readers
// and through the shared read(), with idle()/renew cycles; the loader over them, also with a
// per-record transform.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gpufeed/lmdb_source.hpp"
#include "gpufeed/loader.hpp"
#include "lmdb_test_util.hpp"
#include "sequential_check.hpp"
#include "test_util.hpp"

using namespace gpufeed;
using namespace gpufeed::test;

namespace {

// Two shards of raw values, 1 B .. 20 KiB.
struct fixture {
  temp_dir dir{"lmdb-threads"};
  std::vector<std::string> values;
  std::vector<std::filesystem::path> paths;
  fixture() {
    std::mt19937_64 rng(11);
    for (int sh = 0; sh < 2; ++sh) {
      kv_list kv;
      for (int i = 0; i < 400; ++i) {
        kv.emplace_back(key8(static_cast<std::uint64_t>(i)), random_bytes(rng, 1 + rng() % 20000));
        values.push_back(kv.back().second);
      }
      paths.push_back(dir / ("s" + std::to_string(sh)));
      write_lmdb(paths.back(), kv);
    }
  }
};

void hammer(const lmdb_source& s, const std::vector<std::string>& values, bool own_reader,
            unsigned seed, std::atomic<int>& bad) {
  std::mt19937_64 rng(seed);
  std::vector<std::byte> buf(s.max_record_size());
  auto r = s.make_reader();
  for (int n = 0; n < 600; ++n) {
    const std::uint64_t i = rng() % s.size();
    const std::size_t size = s.record_size(i);
    if (own_reader)
      r.read(i, buf);
    else
      s.read(i, buf);
    if (size != values[i].size() || std::memcmp(buf.data(), values[i].data(), size) != 0) ++bad;
    if (own_reader && n % 37 == 0) r.idle();  // end of a "batch": reset, renewed on next read
  }
}

}  // namespace

TEST_CASE("16 threads read random records: own readers and the shared read()") {
  fixture f;
  for (bool immutable : {true, false}) {
    CAPTURE(immutable);
    lmdb_options o;
    o.immutable = immutable;
    o.max_readers = 64;  // 8 readers + up to 8 pooled txns per shard, with a margin
    const lmdb_source s(f.paths, o);
    REQUIRE(s.size() == f.values.size());
    std::atomic<int> bad{0};
    std::vector<std::thread> threads;
    for (unsigned t = 0; t < 16; ++t)
      threads.emplace_back([&, t] { hammer(s, f.values, t % 2 == 0, 100 + t, bad); });
    for (auto& th : threads) th.join();
    CHECK(bad.load() == 0);
  }
}

TEST_CASE("reader idle()/renew cycles keep returning the right bytes") {
  fixture f;
  const lmdb_source s(f.paths);
  auto r = s.make_reader();
  std::vector<std::byte> buf(s.max_record_size());
  for (int cycle = 0; cycle < 200; ++cycle) {
    for (std::uint64_t i : {std::uint64_t(cycle), std::uint64_t(799 - cycle)}) {
      r.read(i, buf);
      CHECK(std::memcmp(buf.data(), f.values[i].data(), f.values[i].size()) == 0);
    }
    r.idle();
    if (cycle % 3 == 0) r.idle();  // idle twice is harmless
  }
  auto moved = std::move(r);  // a reader moves with its transactions
  moved.read(5, buf);
  CHECK(std::memcmp(buf.data(), f.values[5].data(), f.values[5].size()) == 0);
}

TEST_CASE("sequential order through the loader: 0..n-1 each epoch, bytes exact, any workers") {
  const fixture f;
  const lmdb_source s(f.paths);
  REQUIRE(s.size() == f.values.size());
  for (const std::size_t workers : {1, 2, 4, 7}) {
    CAPTURE(workers);
    loader_config c;
    c.batch_size = 48;  // 800 records: the last batch of each epoch is short
    c.order = sample_order::sequential;
    c.part = partition{};
    c.workers = workers;
    c.chunk_records = 5;
    c.epochs = 2;
    loader<lmdb_source> l(s, c);
    test::check_sequential_epochs(l, s.size(), 2, [&](std::uint64_t i, auto bytes) {
      const std::string& want = f.values[static_cast<std::size_t>(i)];
      return bytes.size() == want.size() && std::memcmp(bytes.data(), want.data(), want.size()) == 0;
    });
  }
}

TEST_CASE("a record transform over LMDB shards: exact outputs once each, errors name the shard") {
  fixture f;
  lmdb_source s(f.paths);
  loader_config c;
  c.batch_size = 32;
  c.part = partition{};
  c.epochs = 1;
  c.workers = 4;
  // Bounded: the value reversed, as long as it is (values are 1 B .. 20 KiB).
  c.per_record = record_transform::bounded(
      20000, [](const record_input& in, std::span<std::byte> out, record_rng&) -> std::size_t {
        if (in.index == 555) throw corrupt_error("not an image");
        std::reverse_copy(in.bytes.begin(), in.bytes.end(), out.begin());
        return in.bytes.size();
      });
  c.on_error = error_policy::skip;
  {
    loader<lmdb_source> l(s, c);
    std::vector<int> seen(s.size(), 0);
    std::size_t skipped = 0;
    while (auto b = l.next()) {
      for (const auto& r : b->skipped()) {
        CHECK(r.index == 555);
        CHECK(r.what.find(f.paths[1].string()) != std::string::npos);
        ++skipped;
      }
      for (std::size_t k = 0; k < b->size(); ++k) {
        const std::uint64_t i = b->indices()[k];
        std::string expect = f.values[i];
        std::reverse(expect.begin(), expect.end());
        const auto r = b->record(k);
        CHECK(std::string(reinterpret_cast<const char*>(r.data()), r.size()) == expect);
        ++seen[i];
      }
    }
    CHECK(skipped == 1);
    for (std::uint64_t i = 0; i < s.size(); ++i) CHECK(seen[i] == (i == 555 ? 0 : 1));
  }
  c.on_error = error_policy::throw_error;
  loader<lmdb_source> l(s, c);
  int errors = 0;
  for (;;) {
    try {
      if (!l.next()) break;
    } catch (const corrupt_error& e) {
      ++errors;
      CHECK(e.file() == f.paths[1].string());
      CHECK(e.record() == 555u);
    }
  }
  CHECK(errors == 1);
}
