// The per-record transform stage under the loader's error policies (host target): a throwing
// transform under throw_error, skip and substitute, fixed and bounded outputs, outputs over the
// bound, failed reads before the transform, and no hang in any of them (watchdogs).
#include <doctest/doctest.h>

#include <chrono>
#include <cstdint>
#include <atomic>
#include <exception>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
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

loader_config sequential(std::size_t batch, error_policy policy) {
  loader_config c;
  c.batch_size = batch;
  c.seed = 99;
  c.order = sample_order::sequential;
  c.part = partition{};
  c.epochs = 1;
  c.workers = 4;
  c.chunk_records = 3;
  c.on_error = policy;
  return c;
}

// The reference transform (fixed or bounded), throwing `make(i)` for the records it names.
template <class Throw>
record_transform failing(const sharded_source& src, bool bounded, std::size_t bytes, Throw make) {
  auto f = [&src, make, bounded](const record_input& in, std::span<std::byte> out,
                                 record_rng& rng) -> std::size_t {
    make(in.index);
    const std::size_t n = bounded ? test::bounded_size(rng, out.size()) : out.size();
    test::transform_into(in, out, rng, n, src);
    return n;
  };
  return bounded ? record_transform::bounded(bytes, f) : record_transform::fixed(bytes, f);
}

void corrupt_at_multiples_of_17(std::uint64_t i) {
  if (i % 17 == 5) throw corrupt_error("bad pixels");
}

}  // namespace

TEST_CASE("throw policy: the transform's error arrives at its batch, naming shard and record") {
  test::watchdog dog(60s, "record transform throw policy");
  sharded_source src(300, 0, 20);
  for (const bool bounded : {false, true}) {
    CAPTURE(bounded);
    loader_config c = sequential(20, error_policy::throw_error);
    c.per_record = failing(src, bounded, 64, [](std::uint64_t i) {
      if (i == 137) throw corrupt_error("bad pixels");
    });
    loader<sharded_source> l(src, c);
    std::vector<std::uint64_t> numbers;
    int errors = 0;
    for (;;) {
      try {
        auto b = l.next();
        if (!b) break;
        numbers.push_back(b->number());
        for (std::size_t k = 0; k < b->size(); ++k)
          CHECK(test::reference_output(src, 99, 0, b->indices()[k], 64, bounded) ==
                std::vector<std::byte>(b->record(k).begin(), b->record(k).end()));
      } catch (const corrupt_error& e) {
        ++errors;
        CHECK(e.record() == 137u);
        CHECK(e.file() == "shard-1.h5");
        CHECK(e.message() == "record transform failed: bad pixels");
        try {
          std::rethrow_if_nested(e);
          FAIL("the original error is nested");
        } catch (const corrupt_error& original) {
          CHECK(original.message() == "bad pixels");
          CHECK_FALSE(original.record());
        }
      }
    }
    CHECK(errors == 1);
    CHECK(numbers == std::vector<std::uint64_t>{0, 1, 2, 3, 4, 5, 7, 8, 9, 10, 11, 12, 13, 14});
  }
}

TEST_CASE("an exception that is no gpufeed::error becomes one, with the original nested") {
  test::watchdog dog(60s, "record transform foreign exception");
  sharded_source src(40, 8);
  loader_config c = sequential(10, error_policy::throw_error);
  c.per_record = failing(src, false, 8, [](std::uint64_t i) {
    if (i == 23) throw std::runtime_error("decoder said no");
  });
  loader<sharded_source> l(src, c);
  CHECK(l.next());
  CHECK(l.next());
  try {
    (void)l.next();
    FAIL("batch 2 holds record 23");
  } catch (const error& e) {
    CHECK(e.record() == 23u);
    CHECK(e.file() == "shard-0.h5");
    CHECK(e.message() == "record transform failed: decoder said no");
    CHECK_THROWS_WITH_AS(std::rethrow_if_nested(e), "decoder said no", std::runtime_error);
  }
  CHECK(l.next());
  CHECK_FALSE(l.next());
}

TEST_CASE("skip policy: records the transform throws on are left out; the rest arrive once") {
  test::watchdog dog(60s, "record transform skip policy");
  sharded_source src(250, 0, 30);
  for (const bool bounded : {false, true}) {
    CAPTURE(bounded);
    loader_config c = sequential(16, error_policy::skip);
    c.order = sample_order::shuffled;
    c.per_record = failing(src, bounded, 50, corrupt_at_multiples_of_17);
    loader<sharded_source> l(src, c);
    std::map<std::uint64_t, int> got;
    std::set<std::uint64_t> logged;
    std::size_t short_batches = 0;
    while (auto b = l.next()) {
      std::size_t failed_here = 0;
      for (const auto& s : b->skipped()) {
        CHECK_FALSE(s.substituted);
        CHECK(s.what.find("record transform failed: bad pixels") != std::string::npos);
        CHECK(s.what.find("record " + std::to_string(s.index)) != std::string::npos);
        CHECK(s.what.find(test::shard_name(s.index)) != std::string::npos);
        CHECK(logged.insert(s.index).second);
        ++failed_here;
      }
      if (failed_here) ++short_batches;
      CHECK(b->offsets()[b->size()] == b->data().size());
      for (std::size_t k = 0; k < b->size(); ++k) {
        const std::uint64_t i = b->indices()[k];
        CHECK(test::reference_output(src, 99, 0, i, 50, bounded) ==
              std::vector<std::byte>(b->record(k).begin(), b->record(k).end()));
        CHECK(b->labels()[k] == src.label(i));
        ++got[i];
      }
    }
    CHECK(short_batches > 0);
    for (std::uint64_t i = 0; i < 250; ++i) {
      CAPTURE(i);
      CHECK(got[i] == (i % 17 == 5 ? 0 : 1));
      CHECK(logged.count(i) == (i % 17 == 5 ? 1u : 0u));
    }
  }
}

TEST_CASE("substitute policy: full batches; a hole holds a good record's output, any size") {
  test::watchdog dog(60s, "record transform substitute policy");
  sharded_source src(250, 0, 30);
  for (const bool bounded : {false, true}) {
    CAPTURE(bounded);
    loader_config c = sequential(16, error_policy::substitute);
    c.per_record = failing(src, bounded, 50, corrupt_at_multiples_of_17);
    loader<sharded_source> l(src, c);
    std::size_t substituted = 0, sizes_differ = 0;
    while (auto b = l.next()) {
      const std::size_t expected = b->number() == 15 ? 10 : 16;  // 250 = 15 x 16 + 10
      CHECK(b->size() == expected);
      for (std::size_t k = 0; k < b->size(); ++k) {
        const std::uint64_t i = b->indices()[k];
        CHECK(i % 17 != 5);  // a failed record never appears; its donor does
        CHECK(test::reference_output(src, 99, 0, i, 50, bounded) ==
              std::vector<std::byte>(b->record(k).begin(), b->record(k).end()));
        CHECK(b->labels()[k] == src.label(i));
      }
      for (const auto& s : b->skipped()) {
        CHECK(s.substituted);
        const auto own = test::reference_output(src, 99, 0, s.index, 50, bounded);
        const auto donor = test::reference_output(src, 99, 0, s.substitute_index, 50, bounded);
        if (own.size() != donor.size()) ++sizes_differ;
        ++substituted;
      }
    }
    CHECK(substituted == 15);  // i = 5, 22, ..., 243
    // Bounded outputs: the donors' sizes differ from what the failed record's would have been
    // (a same-size rule would have skipped them instead).
    if (bounded) CHECK(sizes_differ > 0);
  }
}

TEST_CASE("substitute with no good record in the batch: the batch arrives empty, no hang") {
  test::watchdog dog(60s, "record transform substitute, all failed");
  sharded_source src(60, 0, 30);
  for (const bool bounded : {false, true}) {
    CAPTURE(bounded);
    loader_config c = sequential(10, error_policy::substitute);
    c.per_record = failing(src, bounded, 40, [](std::uint64_t i) {
      if (i >= 20 && i < 30) throw format_error("not an image");
    });
    loader<sharded_source> l(src, c);
    std::vector<std::size_t> sizes;
    while (auto b = l.next()) {
      sizes.push_back(b->size());
      if (b->number() == 2) CHECK(b->skipped().size() == 10);
    }
    CHECK(sizes == std::vector<std::size_t>{10, 10, 0, 10, 10, 10});
  }
}

TEST_CASE("an output over the bound is a config_error naming the record, under every policy") {
  test::watchdog dog(60s, "record transform oversize outputs");
  sharded_source src(120, 16);
  for (const error_policy policy :
       {error_policy::throw_error, error_policy::skip, error_policy::substitute}) {
    for (const bool bounded : {false, true}) {
      CAPTURE(static_cast<int>(policy));
      CAPTURE(bounded);
      loader_config c = sequential(10, policy);
      auto f = [](const record_input& in, std::span<std::byte> out, record_rng&) -> std::size_t {
        if (in.index == 42) return out.size() + 1;  // a bug: claims more than it had room for
        if (in.index == 77) throw corrupt_error("bad pixels");  // data errors still follow policy
        return out.size();
      };
      c.per_record = bounded ? record_transform::bounded(32, f) : record_transform::fixed(32, f);
      loader<sharded_source> l(src, c);
      int errors = 0;
      std::size_t delivered = 0;
      for (;;) {
        try {
          auto b = l.next();
          if (!b) break;
          delivered += b->size();
        } catch (const config_error& e) {
          ++errors;
          CHECK(e.record() == 42u);
          CHECK(e.file() == "shard-0.h5");
          CHECK(e.message().find(bounded ? "more than its bound of 32" : "fixed output of 32") !=
                std::string::npos);
        } catch (const corrupt_error& e) {
          CHECK(policy == error_policy::throw_error);
          CHECK(e.record() == 77u);
        }
      }
      CHECK(errors == 1);
      const std::size_t lost_to_77 = policy == error_policy::skip ? 1 : 0;
      CHECK(delivered == 120 - 10 - (policy == error_policy::throw_error ? 10 : lost_to_77));
    }
  }
}

TEST_CASE("a failed read before the transform is the source's own error, under the policy") {
  test::watchdog dog(60s, "record transform after failed reads");
  sharded_source src(100, 0, 25);
  src.fail = [](std::uint64_t i) { return i == 64; };
  loader_config c = sequential(10, error_policy::throw_error);
  c.per_record = test::fixed_transform(src, 24);
  {
    loader<sharded_source> l(src, c);
    int errors = 0;
    for (;;) {
      try {
        if (!l.next()) break;
      } catch (const corrupt_error& e) {
        ++errors;
        CHECK(e.message() == "planted corruption");  // not wrapped: it is no transform failure
        CHECK(e.file() == "memory://test");
        CHECK(e.record() == 64u);
      }
    }
    CHECK(errors == 1);
  }
  c.on_error = error_policy::skip;
  loader<sharded_source> l(src, c);
  std::size_t delivered = 0;
  while (auto b = l.next()) delivered += b->size();
  CHECK(delivered == 99);
}

TEST_CASE("destroying a loader mid-epoch with a slow transform returns promptly") {
  test::watchdog dog(60s, "record transform shutdown");
  sharded_source src(5000, 64);
  loader_config c = sequential(32, error_policy::skip);
  c.epochs = 0;
  c.per_record = record_transform::fixed(
      64, [](const record_input&, std::span<std::byte>, record_rng&) {
        std::this_thread::sleep_for(200us);
      });
  const auto t0 = std::chrono::steady_clock::now();
  {
    loader<sharded_source> l(src, c);
    CHECK(l.next());
  }
  CHECK(std::chrono::steady_clock::now() - t0 < 30s);
}

namespace {
// sharded_source that knows input names (record_naming_source) and counts the lookups; its
// lookup of record 61's name fails.
class naming_source : public sharded_source {
 public:
  using sharded_source::sharded_source;
  std::optional<std::string> name_of(std::uint64_t i) const {
    lookups.fetch_add(1, std::memory_order_relaxed);
    if (i == 61) throw format_error("names table damaged");
    if (i == 62) return std::nullopt;
    return "in/" + std::to_string(i) + ".jpg";
  }
  mutable std::atomic<std::uint64_t> lookups{0};
};
static_assert(record_naming_source<naming_source>);
}  // namespace

TEST_CASE("a transform's failure names the record's input; names are looked up for failures only") {
  test::watchdog dog(60s, "record transform input names");
  naming_source src(100, 8);
  for (const error_policy p : {error_policy::throw_error, error_policy::skip}) {
    CAPTURE(static_cast<int>(p));
    src.lookups = 0;
    loader_config c = sequential(10, p);
    c.per_record = failing(src, false, 8, [](std::uint64_t i) {
      if (i == 7 || i == 61 || i == 62) throw corrupt_error("bad pixels");
    });
    loader<naming_source> l(src, c);
    std::map<std::uint64_t, std::string> input;  // failed record -> the input its error names
    for (;;) {
      try {
        auto b = l.next();
        if (!b) break;
        for (const auto& s : b->skipped()) {
          input[s.index] = s.input;
          CHECK(s.what.find(s.input.empty() ? "record " + std::to_string(s.index) + "]"
                                            : "input '" + s.input + "'") != std::string::npos);
        }
      } catch (const corrupt_error& e) {
        REQUIRE(e.record());
        input[*e.record()] = e.input();
        CHECK(e.message() == "record transform failed: bad pixels");  // never the lookup's error
      }
    }
    // throw_error fails batch 6 with its first failure (61) only.
    std::map<std::uint64_t, std::string> want{{7, "in/7.jpg"}, {61, ""}};
    if (p == error_policy::skip) want[62] = "";
    CHECK(input == want);
    CHECK(src.lookups == 3);  // one per failure, none for the 97 good records
  }
}
