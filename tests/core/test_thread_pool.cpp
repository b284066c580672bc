#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include "gpufeed/thread_pool.hpp"

using namespace gpufeed;
using namespace std::chrono_literals;

TEST_CASE("submit returns each task's result") {
  thread_pool pool(4);
  CHECK(pool.size() == 4);
  std::vector<std::future<int>> futures;
  for (int i = 0; i < 1000; ++i) futures.push_back(pool.submit([i] { return i * i; }));
  for (int i = 0; i < 1000; ++i) CHECK(futures[i].get() == i * i);
}

TEST_CASE("tasks run on pool threads with distinct worker indices") {
  thread_pool pool(3);
  CHECK(thread_pool::worker_index() == -1);
  std::atomic<int> arrived{0};
  std::vector<std::future<int>> f;
  // Three tasks that wait for each other must be on three different workers.
  for (int i = 0; i < 3; ++i)
    f.push_back(pool.submit([&] {
      ++arrived;
      while (arrived.load() < 3) std::this_thread::yield();
      return thread_pool::worker_index();
    }));
  std::set<int> seen;
  for (auto& x : f) seen.insert(x.get());
  CHECK(seen == std::set<int>{0, 1, 2});
}

TEST_CASE("an exception crosses from the worker to the caller with its type") {
  thread_pool pool(2);
  auto f = pool.submit([]() -> int { throw corrupt_error("bad chunk", error_context{.record = 9}); });
  try {
    (void)f.get();
    FAIL("expected corrupt_error");
  } catch (const corrupt_error& e) {
    CHECK(e.record() == 9u);
  }
  // The worker survives and keeps serving.
  CHECK(pool.submit([] { return 5; }).get() == 5);
  auto g = pool.submit([] { throw std::logic_error("plain std exception"); });
  CHECK_THROWS_AS(g.get(), std::logic_error);
}

TEST_CASE("stop while busy: running tasks see the stop token, queued ones are cancelled") {
  std::atomic<int> running{0};
  std::vector<std::future<int>> loops;
  std::vector<std::future<void>> queued;
  {
    thread_pool pool(2, 64);
    for (int i = 0; i < 2; ++i)
      loops.push_back(pool.submit([&](std::stop_token st) {
        ++running;
        while (!st.stop_requested()) std::this_thread::sleep_for(1ms);
        return 7;  // ran to its end: a running task is stopped through its token, not cancelled
      }));
    for (int i = 0; i < 50; ++i) queued.push_back(pool.submit([] {}));
    while (running.load() < 2) std::this_thread::yield();
    pool.stop();
    CHECK_THROWS_AS(pool.submit([] {}), cancelled_error);
  }
  for (auto& l : loops) CHECK(l.get() == 7);
  for (auto& q : queued) CHECK_THROWS_AS(q.get(), cancelled_error);
}

TEST_CASE("drain runs everything queued before joining") {
  std::atomic<int> done{0};
  thread_pool pool(2, 8);
  for (int i = 0; i < 200; ++i)  // more than the queue holds: submit applies backpressure
    pool.submit([&] {
      std::this_thread::sleep_for(10us);
      ++done;
    });
  pool.drain();
  CHECK(done.load() == 200);
}

TEST_CASE("many submitters under load") {
  thread_pool pool(8, 16);
  std::atomic<long> sum{0};
  {
    std::vector<std::jthread> submitters;
    for (int s = 0; s < 8; ++s)
      submitters.emplace_back([&, s] {
        std::vector<std::future<void>> fs;
        for (int i = 0; i < 2000; ++i) fs.push_back(pool.submit([&, v = s * 2000 + i] { sum += v; }));
        for (auto& f : fs) f.get();
      });
  }
  const long n = 8 * 2000;
  CHECK(sum.load() == n * (n - 1) / 2);
}

TEST_CASE("zero workers is a configuration error") {
  CHECK_THROWS_AS(thread_pool(0), config_error);
}
