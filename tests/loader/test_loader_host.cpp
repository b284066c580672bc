// The loader on the host target: exactly-once delivery, order, resume, ranks, memory budget.
#include <doctest/doctest.h>

#include <algorithm>
#include <numeric>
#include <set>
#include <vector>

#include "gpufeed/loader.hpp"
#include "memory_source.hpp"
#include "sequential_check.hpp"

namespace loading = gpufeed::detail::loading;

using namespace gpufeed;
using test::memory_source;

namespace {

// Checks every delivered record's bytes, label, index and offsets; returns the indices.
std::vector<std::uint64_t> check_batch(const memory_source& src, const batch& b) {
  std::vector<std::uint64_t> got;
  REQUIRE(b.valid());
  CHECK_FALSE(b.on_device());
  CHECK(b.offsets()[0] == 0);
  CHECK(b.offsets()[b.size()] == b.data().size());
  for (std::size_t k = 0; k < b.size(); ++k) {
    const auto i = b.indices()[k];
    CHECK(src.matches(i, b.record(k)));
    CHECK(b.labels()[k] == src.label(i));
    got.push_back(i);
  }
  if (src.fixed_record_size()) CHECK(b.record_bytes() == src.fixed_record_size());
  return got;
}

template <class L>
std::vector<std::vector<std::uint64_t>> run_epochs(L& l, const memory_source& src, int epochs) {
  std::vector<std::vector<std::uint64_t>> out;
  for (int e = 0; e < epochs; ++e) {
    std::vector<std::uint64_t> order;
    std::uint64_t expect_number = 0;
    for (auto& b : l.epoch()) {
      CHECK(b.epoch() == static_cast<std::uint64_t>(e));
      CHECK(b.number() == expect_number++);
      auto got = check_batch(src, b);
      order.insert(order.end(), got.begin(), got.end());
    }
    CHECK(expect_number == l.batches_per_epoch());
    out.push_back(std::move(order));
  }
  return out;
}

void check_exactly_once(std::vector<std::uint64_t> order, std::uint64_t n) {
  std::sort(order.begin(), order.end());
  std::vector<std::uint64_t> all(n);
  std::iota(all.begin(), all.end(), 0);
  CHECK(order == all);
}

loader_config base_config(std::size_t batch) {
  loader_config c;
  c.batch_size = batch;
  c.seed = 77;
  c.part = partition{};
  return c;
}

}  // namespace

TEST_CASE("fixed-size records: every record exactly once per epoch, fresh order each epoch") {
  memory_source src(1000, 64);
  loader<memory_source, loader_options<4, 3, 1>> l(src, base_config(32));
  CHECK(l.batches_per_epoch() == 32);  // 31 full + 1 of 8
  auto epochs = run_epochs(l, src, 3);
  for (auto& e : epochs) check_exactly_once(e, 1000);
  CHECK(epochs[0] != epochs[1]);
  CHECK(epochs[1] != epochs[2]);
  const auto s = l.stats();
  CHECK(s.records == 3000);
  CHECK(s.batches == 96);
  CHECK(s.bytes == 3000 * 64);
  CHECK(s.worker_count == 4);
  CHECK(s.prefetch == 3);
  std::uint64_t read_by_workers = 0;
  for (const auto& w : s.workers) read_by_workers += w.records;
  CHECK(read_by_workers >= 3000);  // the planner may run ahead into epoch 4
}

TEST_CASE("sequential order through the loader: 0..n-1 each epoch, bytes exact, any workers") {
  for (const std::size_t fixed : {std::size_t{96}, std::size_t{0}}) {
    const memory_source src(1001, fixed, 700);  // 1001: the last batch of each epoch is short
    for (const std::size_t workers : {1, 2, 3, 5}) {
      CAPTURE(fixed);
      CAPTURE(workers);
      loader_config c = base_config(64);
      c.order = sample_order::sequential;
      c.workers = workers;
      c.chunk_records = 7;  // several tasks per batch, finishing in any order
      c.epochs = 2;
      loader<memory_source> l(src, c);
      test::check_sequential_epochs(l, src.size(), 2, [&](std::uint64_t i, auto bytes) {
        return src.matches(i, bytes);
      });
    }
  }
}

TEST_CASE("variable-size records: bytes and offsets exact") {
  memory_source src(777, 0, 300);
  loader_config c = base_config(50);
  c.workers = 3;
  c.prefetch = 2;
  loader<memory_source> l(src, c);
  auto epochs = run_epochs(l, src, 2);
  for (auto& e : epochs) check_exactly_once(e, 777);
}

TEST_CASE("the order depends on (seed, epoch) only, not on workers, prefetch or chunking") {
  memory_source src(500, 16);
  auto order_with = [&](std::size_t workers, std::size_t prefetch, std::size_t chunk) {
    loader_config c = base_config(20);
    c.workers = workers;
    c.prefetch = prefetch;
    c.chunk_records = chunk;
    loader<memory_source> l(src, c);
    return run_epochs(l, src, 2);
  };
  const auto a = order_with(1, 1, 1);
  CHECK(a == order_with(8, 6, 0));
  CHECK(a == order_with(3, 2, 7));
}

TEST_CASE("resume: save after k batches, restore into a new loader, same remaining sequence") {
  memory_source src(300, 8);
  loader_config c = base_config(16);  // 19 batches per epoch
  c.epochs = 3;
  std::vector<std::uint64_t> uninterrupted;
  {
    loader<memory_source, loader_options<2, 2, 1>> l(src, c);
    while (auto b = l.next())
      for (auto i : b->indices()) uninterrupted.push_back(i);
  }
  CHECK(uninterrupted.size() == 900);
  for (std::size_t k : {1u, 5u, 18u, 19u, 30u}) {
    std::vector<std::uint64_t> resumed;
    sampler_state saved;
    {
      loader<memory_source, loader_options<5, 4, 2>> l(src, c);
      for (std::size_t j = 0; j < k; ++j) {
        auto b = l.next();
        REQUIRE(b);
        for (auto i : b->indices()) resumed.push_back(i);
      }
      saved = l.state();
    }  // destroyed with batches in flight
    CHECK(saved.seed == c.seed);
    CHECK(saved.epoch == k / 19);
    CHECK(saved.position == (k % 19) * 16);  // one rank: a round is one batch of 16
    loader_config r = c;
    r.resume = saved;
    r.workers = 1;
    loader<memory_source> l2(src, r);
    while (auto b = l2.next())
      for (auto i : b->indices()) resumed.push_back(i);
    CHECK(resumed == uninterrupted);
  }
}

TEST_CASE("the epochs limit ends the stream") {
  memory_source src(10, 4);
  loader_config c = base_config(4);
  c.epochs = 2;
  loader<memory_source> l(src, c);
  int batches = 0;
  while (auto b = l.next()) ++batches;
  CHECK(batches == 6);
  CHECK_FALSE(l.next().has_value());
}

TEST_CASE("ranks: equal batch counts; the union over ranks is the dataset") {
  memory_source src(1001, 4);
  std::set<std::uint64_t> uni;
  std::optional<std::uint64_t> batches;
  for (std::uint32_t r = 0; r < 4; ++r) {
    loader_config c = base_config(10);
    c.part = partition{r, 4};
    c.epochs = 1;
    loader<memory_source> l(src, c);
    std::uint64_t n = 0;
    std::set<std::uint64_t> mine;
    while (auto b = l.next()) {
      ++n;
      for (auto i : check_batch(src, *b)) CHECK(mine.insert(i).second);
    }
    if (batches) CHECK(n == *batches);
    batches = n;
    uni.insert(mine.begin(), mine.end());
  }
  CHECK(uni.size() == 1001);
}

TEST_CASE("host slot memory is allocated once and stays flat over 20 epochs") {
  memory_source src(256, 128);
  counting_resource counting;
  loader_config c = base_config(32);
  c.staging_memory = &counting;
  c.prefetch = 3;
  c.max_held_batches = 2;
  loader<memory_source> l(src, c);
  const std::size_t bytes = counting.bytes_in_use();
  const std::size_t allocations = counting.allocations();
  CHECK(bytes > 0);
  CHECK(allocations == 5);  // prefetch + max_held slots
  CHECK(l.stats().host_slot_bytes == bytes);
  run_epochs(l, src, 20);
  CHECK(counting.bytes_in_use() == bytes);
  CHECK(counting.allocations() == allocations);
  CHECK(counting.peak_bytes() == bytes);
}

TEST_CASE("a transform hook sees each batch and fills its output") {
  memory_source src(200, 10);
  loader_config c = base_config(25);
  c.transform_output_bytes = 25 * sizeof(std::uint64_t);
  c.transform = [](const batch_view& v, stream_handle s) {
    CHECK(s == nullptr);
    CHECK_FALSE(v.on_device);
    auto* sums = reinterpret_cast<std::uint64_t*>(v.output);
    for (std::size_t k = 0; k < v.records; ++k) {
      std::uint64_t sum = 0;
      for (std::uint64_t j = v.offsets[k]; j < v.offsets[k + 1]; ++j)
        sum += static_cast<unsigned char>(v.data[j]);
      sums[k] = sum;
    }
  };
  loader<memory_source> l(src, c);
  for (auto& b : l.epoch()) {
    REQUIRE(b.output().size() == 25 * sizeof(std::uint64_t));
    const auto* sums = reinterpret_cast<const std::uint64_t*>(b.output().data());
    for (std::size_t k = 0; k < b.size(); ++k) {
      std::uint64_t expect = 0;
      for (std::size_t j = 0; j < 10; ++j)
        expect += test::expected_value(b.indices()[k], j);
      CHECK(sums[k] == expect);
    }
  }
}

TEST_CASE("holding more batches than allowed is a clear error, not a deadlock") {
  memory_source src(100, 4);
  loader_config c = base_config(10);
  c.max_held_batches = 2;
  loader<memory_source> l(src, c);
  auto a = l.next();
  auto b = l.next();
  CHECK_THROWS_AS(l.next(), config_error);
  a.reset();
  CHECK(l.next().has_value());
}

TEST_CASE("configuration errors are typed") {
  memory_source src(100, 4);
  loader_config c = base_config(0);
  CHECK_THROWS_AS(loader<memory_source>(src, c), config_error);
  c = base_config(200);
  c.drop_last = true;
  CHECK_THROWS_AS(loader<memory_source>(src, c), config_error);  // no full batch
  c = base_config(10);
  c.resume = sampler_state{0, 0, 101};  // an epoch has 100 positions: 0..100 (100 = its end)
  CHECK_THROWS_AS(loader<memory_source>(src, c), config_error);
}

TEST_CASE("batch_size above a rank's records: a notice naming the short batch, the batch delivered") {
  memory_source src(100, 4);
  loader_config c = base_config(200);
  const auto one = loading::resolve_config<default_options>(src, c, 4);
  CHECK(one.size_notice.find("batch_size 200 is larger than the 100 records") != std::string::npos);
  CHECK(one.size_notice.find("one short batch of 100 records") != std::string::npos);
  CHECK(one.size_notice.find("drop_last") != std::string::npos);
  loader<memory_source> l(src, c);
  auto epochs = run_epochs(l, src, 1);
  CHECK(l.batches_per_epoch() == 1);
  check_exactly_once(epochs[0], 100);

  // A rank's share: 100 records over 4 ranks are 25 each, below a batch of 30.
  c = base_config(30);
  c.part = partition{1, 4};
  const auto rank = loading::resolve_config<default_options>(src, c, 4);
  CHECK(rank.size_notice.find("larger than the 25 records per rank (100 records over 4 ranks)") !=
        std::string::npos);

  // A batch that fits (also exactly) gets no notice.
  c = base_config(100);
  CHECK(loading::resolve_config<default_options>(src, c, 4).size_notice.empty());
  c = base_config(25);
  c.part = partition{1, 4};
  CHECK(loading::resolve_config<default_options>(src, c, 4).size_notice.empty());
}
