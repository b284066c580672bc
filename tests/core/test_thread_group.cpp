#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <stop_token>
#include <thread>

#include "gpufeed/detail/thread_group.hpp"

using gpufeed::detail::thread_group;

TEST_CASE("thread_group: runs every thread; join waits for all of them") {
  std::atomic<int> ran{0};
  thread_group g;
  for (int k = 0; k < 4; ++k) g.spawn([&] { ran.fetch_add(1); });
  g.spawn([&](std::stop_token) { ran.fetch_add(1); });
  CHECK(g.size() == 5);
  g.join();
  CHECK(ran.load() == 5);
}

TEST_CASE("thread_group: the destructor stops threads blocked on their stop token and joins") {
  std::atomic<int> stopped{0};
  {
    thread_group g;
    for (int k = 0; k < 3; ++k)
      g.spawn([&](std::stop_token st) {
        std::mutex m;
        std::condition_variable_any cv;
        std::unique_lock lock(m);
        cv.wait(lock, st, [] { return false; });  // only a stop request ends this
        stopped.fetch_add(1);
      });
  }
  CHECK(stopped.load() == 3);
}
