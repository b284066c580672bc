#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <numeric>
#include <thread>
#include <vector>

#include "gpufeed/bounded_queue.hpp"

using namespace gpufeed;
using namespace std::chrono_literals;

TEST_CASE("bounded_queue is FIFO and bounded") {
  bounded_queue<int> q(3);
  CHECK(q.capacity() == 3);
  CHECK(q.try_push(1));
  CHECK(q.try_push(2));
  CHECK(q.try_push(3));
  int four = 4;
  CHECK_FALSE(q.try_push(four));
  CHECK(four == 4);  // a refused value is left untouched
  CHECK(q.size() == 3);
  CHECK(q.high_watermark() == 3);
  CHECK(q.pop() == 1);
  CHECK(q.try_push(4));
  CHECK(q.pop() == 2);
  CHECK(q.pop() == 3);
  CHECK(q.pop() == 4);
  CHECK_FALSE(q.try_pop().has_value());
}

TEST_CASE("bounded_queue rejects zero capacity") {
  CHECK_THROWS_AS(bounded_queue<int>(0), config_error);
}

TEST_CASE("bounded_queue holds move-only values") {
  bounded_queue<std::unique_ptr<int>> q(2);
  auto p = std::make_unique<int>(7);
  CHECK(q.push(p));
  CHECK(p == nullptr);
  auto out = q.pop();
  REQUIRE(out.has_value());
  CHECK(**out == 7);
}

TEST_CASE("close lets consumers drain, then returns nullopt; pushes fail") {
  bounded_queue<int> q(4);
  q.push(1);
  q.push(2);
  q.close();
  CHECK_FALSE(q.push(3));
  CHECK(q.pop() == 1);
  CHECK(q.pop() == 2);
  CHECK_FALSE(q.pop().has_value());
  CHECK(q.closed());
}

TEST_CASE("close wakes blocked producers and consumers") {
  bounded_queue<int> full(1);
  full.push(0);
  bounded_queue<int> empty(1);
  std::atomic<int> returned{0};
  std::jthread producer([&] {
    CHECK_FALSE(full.push(1));
    ++returned;
  });
  std::jthread consumer([&] {
    CHECK_FALSE(empty.pop().has_value());
    ++returned;
  });
  std::this_thread::sleep_for(20ms);
  CHECK(returned.load() == 0);
  full.close();
  empty.close();
  producer.join();
  consumer.join();
  CHECK(returned.load() == 2);
}

TEST_CASE("a stop request wakes a blocked push and pop") {
  bounded_queue<int> q(1);
  q.push(1);
  std::stop_source stop;
  std::jthread producer([&] { CHECK_FALSE(q.push(2, stop.get_token())); });
  std::this_thread::sleep_for(10ms);
  stop.request_stop();
  producer.join();
  CHECK(q.pop() == 1);
  std::stop_source stop2;
  std::jthread consumer([&] { CHECK_FALSE(q.pop(stop2.get_token()).has_value()); });
  std::this_thread::sleep_for(10ms);
  stop2.request_stop();
  consumer.join();
}

TEST_CASE("many producers and consumers: every item delivered exactly once") {
  constexpr int producers = 8, consumers = 8, per_producer = 20000;
  bounded_queue<int> q(16);
  std::vector<std::vector<int>> got(consumers);
  {
    std::vector<std::jthread> threads;
    for (int c = 0; c < consumers; ++c)
      threads.emplace_back([&, c] {
        while (auto v = q.pop()) got[c].push_back(*v);
      });
    std::vector<std::jthread> prod;
    for (int p = 0; p < producers; ++p)
      prod.emplace_back([&, p] {
        for (int i = 0; i < per_producer; ++i) CHECK(q.push(p * per_producer + i));
      });
    for (auto& t : prod) t.join();
    q.close();
  }
  std::vector<int> all;
  for (auto& g : got) all.insert(all.end(), g.begin(), g.end());
  REQUIRE(all.size() == static_cast<std::size_t>(producers * per_producer));
  std::sort(all.begin(), all.end());
  std::vector<int> expect(all.size());
  std::iota(expect.begin(), expect.end(), 0);
  CHECK(all == expect);
  // Per-producer order is preserved for each consumer (FIFO): values from one producer that one
  // consumer saw are increasing.
  for (auto& g : got) {
    std::vector<int> last(producers, -1);
    for (int v : g) {
      CHECK(v > last[v / per_producer]);
      last[v / per_producer] = v;
    }
  }
  CHECK(q.high_watermark() <= 16);
}

TEST_CASE("clear drops queued items and unblocks producers") {
  bounded_queue<int> q(2);
  q.push(1);
  q.push(2);
  std::jthread producer([&] { CHECK(q.push(3)); });
  std::this_thread::sleep_for(10ms);
  CHECK(q.clear() == 2);
  producer.join();
  CHECK(q.pop() == 3);
}

TEST_CASE("push_all hands over a batch in order, waiting for room when it must") {
  bounded_queue<int> q(4);
  std::vector<int> got;
  std::jthread consumer([&] {
    while (auto v = q.pop()) got.push_back(*v);
  });
  std::vector<int> items(50);
  for (int i = 0; i < 50; ++i) items[i] = i;
  CHECK(q.push_all(std::span<int>(items)));
  std::vector<int> more{50, 51};
  CHECK(q.push_all(std::span<int>(more)));
  q.close();
  consumer.join();
  REQUIRE(got.size() == 52);
  for (int i = 0; i < 52; ++i) CHECK(got[i] == i);
  std::vector<int> late{1};
  CHECK_FALSE(q.push_all(std::span<int>(late)));  // closed
}
