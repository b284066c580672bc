// The per-record transform stage (record_transform.hpp) through the loader on the host target:
// every record exactly once, outputs equal to a reference computed from (seed, epoch, record)
// alone whatever the worker count or resume point, fixed and bounded outputs, slot sizing, and
// the generator's pinned values.
#include <doctest/doctest.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "gpufeed/loader.hpp"
#include "gpufeed/record_transform.hpp"
#include "record_transform_util.hpp"
#include "watchdog.hpp"

using namespace gpufeed;
using namespace std::chrono_literals;
using test::sharded_source;

namespace {

loader_config config(std::size_t batch, std::size_t workers) {
  loader_config c;
  c.batch_size = batch;
  c.seed = 1234;
  c.part = partition{};
  c.workers = workers;
  c.chunk_records = 5;  // several tasks per batch, finishing in any order
  return c;
}

// Every record of every epoch exactly once, each equal to its reference output.
void check_against_reference(const std::vector<test::epoch_outputs>& got,
                             const test::memory_source& src, std::uint64_t seed,
                             std::size_t bytes, bool bounded) {
  for (std::size_t e = 0; e < got.size(); ++e) {
    CAPTURE(e);
    REQUIRE(got[e].size() == src.size());
    for (const auto& [i, out] : got[e]) {
      CAPTURE(i);
      CHECK(out == test::reference_output(src, seed, e, i, bytes, bounded));
    }
  }
}

}  // namespace

TEST_CASE("record_rng: pinned outputs, a stream per (seed, epoch, record), uniform helpers in range") {
  record_rng a(1, 2, 3);
  // The stream is part of the contract (augmentations reproduce across releases): pinned, to
  // values computed by a Python transcription of the algorithm the header documents.
  const std::uint64_t first[3] = {a(), a(), a()};
  record_rng again(1, 2, 3);
  for (std::uint64_t v : first) CHECK(again() == v);
  CHECK(first[0] == 0xbddf9008db94b320ull);
  CHECK(first[1] == 0x484c0ab4db908bc8ull);
  CHECK(first[2] == 0xf1e10e4188ae66ddull);
  CHECK(a.counter() == 3);
  record_rng skipped(1, 2, 3);
  skipped.discard(2);
  CHECK(skipped() == first[2]);
  std::set<std::uint64_t> starts;
  for (std::uint64_t s = 0; s < 4; ++s)
    for (std::uint64_t e = 0; e < 4; ++e)
      for (std::uint64_t r = 0; r < 64; ++r) starts.insert(record_rng(s, e, r)());
  CHECK(starts.size() == 4 * 4 * 64);
  record_rng g(7, 0, 0);
  std::uint64_t hist[10] = {};
  for (int k = 0; k < 100000; ++k) {
    const double u = g.uniform();
    REQUIRE(u >= 0.0);
    REQUIRE(u < 1.0);
    const float f = g.uniform_float();
    REQUIRE(f >= 0.0f);
    REQUIRE(f < 1.0f);
    const std::uint64_t b = g.below(10);
    REQUIRE(b < 10);
    ++hist[b];
  }
  for (std::uint64_t h : hist) CHECK((h > 9500 && h < 10500));  // ~6 sigma around 10000
  CHECK(g.below(0) == 0);
  CHECK(g.below(1) == 0);
  std::uniform_int_distribution<int> d(-3, 3);  // a standard UniformRandomBitGenerator
  for (int k = 0; k < 1000; ++k) {
    const int v = d(g);
    REQUIRE((v >= -3 && v <= 3));
  }
}

TEST_CASE("fixed outputs: every record exactly once per epoch, bytes equal to the reference") {
  test::watchdog dog(120s, "fixed record transform epochs");
  sharded_source src(403, 0, 90);  // variable-size inputs, fixed outputs; last batch short
  loader_config c = config(32, 3);
  c.per_record = test::fixed_transform(src, 48);
  loader<sharded_source> l(src, c);
  const auto got = test::collect(l, 3);
  check_against_reference(got, src, c.seed, 48, false);
  CHECK(got[0] != got[1]);  // a fresh draw each epoch
  const auto s = l.stats();
  CHECK(s.bytes == 3 * 403 * 48);
  // Slots sized from the output (32 x 48 data bytes after 1024 of metadata), not from the
  // records (32 x 90): prefetch + max_held slots on the host target.
  CHECK(s.host_slot_bytes == (s.prefetch + 2) * (1024 + 32 * 48));
}

TEST_CASE("fixed outputs: a batch is a contiguous [size, output_bytes] array") {
  test::watchdog dog(60s, "fixed record transform layout");
  sharded_source src(100, 7);
  loader_config c = config(16, 2);
  c.epochs = 1;
  c.per_record = test::fixed_transform(src, 300);  // outputs larger than the records
  loader<sharded_source> l(src, c);
  while (auto b = l.next()) {
    CHECK(b->record_bytes() == 300);
    CHECK(b->data().size() == b->size() * 300);
    for (std::size_t k = 0; k <= b->size(); ++k) CHECK(b->offsets()[k] == k * 300);
  }
}

TEST_CASE("bounded outputs: real sizes in the offsets, packed back to back, exactly once") {
  test::watchdog dog(120s, "bounded record transform epochs");
  sharded_source src(250, 0, 40);
  loader_config c = config(24, 3);
  c.per_record = test::bounded_transform(src, 200);
  loader<sharded_source> l(src, c);
  std::size_t short_batches = 0;
  for (std::size_t e = 0; e < 2; ++e) {
    for (auto& b : l.epoch()) {
      CHECK(b.record_bytes() == 0);
      std::uint64_t sum = 0;
      for (std::size_t k = 0; k < b.size(); ++k) sum += b.record(k).size();
      CHECK(sum == b.data().size());
      if (b.data().size() < b.size() * 200) ++short_batches;
    }
  }
  CHECK(short_batches > 0);  // packing did move records
  loader<sharded_source> again(src, c);
  check_against_reference(test::collect(again, 2), src, c.seed, 200, true);
}

TEST_CASE("augmentation depends on (seed, epoch, record) only: workers 1, 3, 8 and chunking") {
  test::watchdog dog(180s, "record transform across worker counts");
  sharded_source src(300, 0, 64);
  for (const bool bounded : {false, true}) {
    CAPTURE(bounded);
    std::vector<std::vector<test::epoch_outputs>> runs;
    for (const std::size_t workers : {1, 3, 8}) {
      loader_config c = config(20, workers);
      c.chunk_records = workers == 8 ? 0 : workers;  // automatic, 1 and 3 records per task
      c.per_record = bounded ? test::bounded_transform(src, 96) : test::fixed_transform(src, 96);
      loader<sharded_source> l(src, c);
      runs.push_back(test::collect(l, 2));
    }
    CHECK(runs[0] == runs[1]);
    CHECK(runs[0] == runs[2]);
    check_against_reference(runs[0], src, 1234, 96, bounded);
  }
}

TEST_CASE("resume: a restored loader delivers the same augmented bytes as an unbroken run") {
  test::watchdog dog(120s, "record transform resume");
  sharded_source src(200, 0, 50);
  for (const bool bounded : {false, true}) {
    CAPTURE(bounded);
    loader_config c = config(16, 3);  // 13 batches per epoch
    c.epochs = 3;
    c.per_record = bounded ? test::bounded_transform(src, 80) : test::fixed_transform(src, 80);
    auto run = [&](loader<sharded_source>& l, std::size_t limit) {
      std::vector<std::vector<std::byte>> out;
      for (std::size_t n = 0; n < limit; ++n) {
        auto b = l.next();
        if (!b) break;
        const auto d = b->data();
        out.emplace_back(d.begin(), d.end());
      }
      return out;
    };
    loader<sharded_source> whole(src, c);
    const auto all = run(whole, 1000);
    REQUIRE(all.size() == 39);
    loader<sharded_source> first(src, c);
    auto head = run(first, 17);  // into the second epoch
    const sampler_state at = first.state();
    loader_config r = c;
    r.resume = at;
    r.workers = 5;  // another worker count after the restart
    loader<sharded_source> second(src, r);
    const auto tail = run(second, 1000);
    head.insert(head.end(), tail.begin(), tail.end());
    CHECK(head == all);
  }
}

TEST_CASE("a reader that hands out views: the transform reads them, the source is never read") {
  test::watchdog dog(60s, "record transform over views");
  struct viewing_source : test::memory_source {
    viewing_source() : memory_source(120, 0, 30) {
      for (std::uint64_t i = 0; i < size(); ++i) {
        bytes.emplace_back(record_size(i));
        memory_source::read(i, bytes.back());
      }
    }
    std::span<const std::byte> view(std::uint64_t i) const { return bytes[i]; }
    void read(std::uint64_t i, std::span<std::byte> dst) const {
      reads.fetch_add(1);
      memory_source::read(i, dst);
    }
    std::vector<std::vector<std::byte>> bytes;
    mutable std::atomic<int> reads{0};
  };
  static_assert(view_reader<plain_reader<viewing_source>>);
  viewing_source src;
  loader_config c = config(10, 3);
  c.epochs = 2;
  c.per_record = record_transform::fixed(
      8, [&src](const record_input& in, std::span<std::byte> out, record_rng& rng) {
        CHECK(in.bytes.data() == src.bytes[in.index].data());  // the view itself, not a copy
        test::transform_into(in, out, rng, out.size(), src);
      });
  loader<viewing_source> l(src, c);
  check_against_reference(test::collect(l, 2), src, c.seed, 8, false);
  CHECK(src.reads.load() == 0);
}

TEST_CASE("record transform settings are checked") {
  sharded_source src(50, 8);
  loader_config c = config(10, 2);
  c.per_record = record_transform::fixed(
      0, [](const record_input&, std::span<std::byte>, record_rng&) {});
  CHECK_THROWS_AS(loader<sharded_source>(src, c), config_error);
  c.per_record = test::fixed_transform(src, 16);
  c.slot_data_bytes = 4096;
  CHECK_THROWS_AS(loader<sharded_source>(src, c), config_error);
  CHECK_FALSE(static_cast<bool>(record_transform{}));
  CHECK(record_transform{}.output_bytes() == 0);
}

TEST_CASE("stats: the time inside the transform is counted, as part of the workers' read time") {
  test::watchdog dog(60s, "record transform stats");
  sharded_source src(64, 8);
  loader_config c = config(8, 2);
  c.epochs = 1;
  c.per_record = record_transform::fixed(
      8, [](const record_input&, std::span<std::byte>, record_rng&) {
        std::this_thread::sleep_for(std::chrono::microseconds(300));
      });
  loader<sharded_source> l(src, c);
  while (auto b = l.next()) {
  }
  const auto s = l.stats();
  double transform = 0;
  for (const auto& w : s.workers) transform += w.transform_seconds;
  CHECK(transform >= 64 * 300e-6);  // every record slept at least 300 us inside the callable
  CHECK(transform <= s.read_seconds());
}

TEST_CASE("on the host target the batch hook runs after the stage, on the stage's outputs") {
  test::watchdog dog(60s, "record transform then batch hook");
  sharded_source src(90, 5);
  loader_config c = config(16, 3);
  c.epochs = 1;
  c.per_record = record_transform::fixed(
      8, [](const record_input& in, std::span<std::byte> out, record_rng&) {
        const std::uint64_t v = in.index * 3 + 1;
        std::memcpy(out.data(), &v, 8);
      });
  c.transform_output_bytes = 8;
  c.transform = [](const batch_view& v, stream_handle) {
    std::uint64_t sum = 0;
    for (std::size_t k = 0; k < v.records; ++k) {
      std::uint64_t x = 0;
      std::memcpy(&x, v.data + v.offsets[k], 8);
      sum += x;
    }
    std::memcpy(v.output, &sum, 8);
  };
  loader<sharded_source> l(src, c);
  std::size_t records = 0;
  while (auto b = l.next()) {
    std::uint64_t want = 0, got = 0;
    for (std::uint64_t i : b->indices()) want += i * 3 + 1;
    std::memcpy(&got, b->output().data(), 8);
    CHECK(got == want);
    records += b->size();
  }
  CHECK(records == 90);
}

TEST_CASE("bounded outputs may be empty: zero-byte records keep their place") {
  test::watchdog dog(60s, "record transform empty outputs");
  sharded_source src(60, 4);
  loader_config c = config(12, 2);
  c.epochs = 1;
  c.order = sample_order::sequential;
  c.per_record = record_transform::bounded(
      4, [](const record_input& in, std::span<std::byte> out, record_rng&) -> std::size_t {
        if (in.index % 2 == 0) return 0;
        std::copy(in.bytes.begin(), in.bytes.end(), out.begin());
        return out.size();
      });
  loader<sharded_source> l(src, c);
  std::size_t records = 0;
  while (auto b = l.next()) {
    for (std::size_t k = 0; k < b->size(); ++k) {
      const std::uint64_t i = b->indices()[k];
      CHECK(b->record(k).size() == (i % 2 ? 4u : 0u));
      if (i % 2) CHECK(src.matches(i, b->record(k)));
    }
    CHECK(b->data().size() == b->size() / 2 * 4);
    records += b->size();
  }
  CHECK(records == 60);
}
