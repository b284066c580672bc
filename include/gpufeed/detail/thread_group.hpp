// gpufeed::detail — a group of jthreads stopped and joined together: the loader's planner and
// workers, pack's readers and verifiers.
#pragma once

#include <cstddef>
#include <stop_token>
#include <thread>
#include <utility>
#include <vector>

namespace gpufeed::detail {

class thread_group {
 public:
  thread_group() = default;
  thread_group(const thread_group&) = delete;
  thread_group& operator=(const thread_group&) = delete;
  // Stops and joins: whatever the threads use must outlive the group (declare it last).
  ~thread_group() { stop_and_join(); }

  // Starts f(std::stop_token) (or f()) on a new thread.
  template <class F>
  void spawn(F&& f) {
    threads_.emplace_back(std::forward<F>(f));
  }
  void request_stop() noexcept {
    for (auto& t : threads_) t.request_stop();
  }
  void join() noexcept {
    for (auto& t : threads_)
      if (t.joinable()) t.join();
  }
  void stop_and_join() noexcept {
    request_stop();
    join();
  }
  [[nodiscard]] std::size_t size() const noexcept { return threads_.size(); }

 private:
  std::vector<std::jthread> threads_;
};

}  // namespace gpufeed::detail
