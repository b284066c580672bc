// gpufeed — a fixed pool of worker threads with stop tokens and exception transport.
//
// submit(f) queues f and returns a std::future for its result. f may take a std::stop_token as
// its only argument; the token is the pool's, so long-running tasks (the loader's read loops)
// return promptly when the pool stops. An exception thrown by f is stored in its future and
// re-thrown by future::get() on the thread that asks — it never escapes a worker thread.
//
// Shutdown:
//   drain()   no new tasks; runs everything already queued, then joins the workers.
//   stop()    requests stop on every worker's token, discards queued tasks (their futures throw
//             gpufeed::cancelled_error) and joins. Running tasks finish on their own terms: they
//             should watch the token. The destructor calls stop().
// The task queue is bounded (backpressure): submit() blocks while it is full.
#pragma once

#include <cstddef>
#include <exception>
#include <functional>
#include <future>
#include <memory>
#include <stop_token>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "gpufeed/bounded_queue.hpp"
#include "gpufeed/error.hpp"

namespace gpufeed {

namespace detail {

struct pool_task {
  virtual ~pool_task() = default;
  virtual void run(std::stop_token stop) noexcept = 0;
};

template <class F, class R>
class pool_task_impl final : public pool_task {
 public:
  explicit pool_task_impl(F&& f) : f_(std::move(f)) {}
  ~pool_task_impl() override {
    if (!ran_) {  // discarded by stop(): the waiting future learns why instead of broken_promise
      try {
        promise_.set_exception(std::make_exception_ptr(
            cancelled_error("task cancelled: the thread pool stopped before running it")));
      } catch (...) {  // promise_already_satisfied cannot happen; never throw from a destructor
      }
    }
  }
  std::future<R> future() { return promise_.get_future(); }

  void run(std::stop_token stop) noexcept override {
    ran_ = true;
    try {
      if constexpr (std::is_void_v<R>) {
        invoke(stop);
        promise_.set_value();
      } else {
        promise_.set_value(invoke(stop));
      }
    } catch (...) {
      promise_.set_exception(std::current_exception());
    }
  }

 private:
  R invoke(std::stop_token stop) {
    if constexpr (std::is_invocable_v<F&, std::stop_token>)
      return std::invoke(f_, stop);
    else
      return std::invoke(f_);
  }
  F f_;
  std::promise<R> promise_;
  bool ran_ = false;
};

}  // namespace detail

class thread_pool {
 public:
  // workers >= 1; queue_capacity bounds the number of queued (not yet running) tasks.
  explicit thread_pool(std::size_t workers, std::size_t queue_capacity = 1024)
      : queue_(queue_capacity) {
    if (workers == 0) throw config_error("thread_pool needs at least one worker");
    threads_.reserve(workers);
    for (std::size_t w = 0; w < workers; ++w)
      threads_.emplace_back([this, w](std::stop_token stop) { work(stop, w); });
  }
  thread_pool(const thread_pool&) = delete;
  thread_pool& operator=(const thread_pool&) = delete;
  ~thread_pool() { stop(); }

  template <class F>
    requires std::is_invocable_v<std::decay_t<F>&, std::stop_token> ||
             std::is_invocable_v<std::decay_t<F>&>
  auto submit(F&& f) {
    using Fn = std::decay_t<F>;
    using R = typename std::conditional_t<std::is_invocable_v<Fn&, std::stop_token>,
                                          std::invoke_result<Fn&, std::stop_token>,
                                          std::invoke_result<Fn&>>::type;
    auto task = std::make_unique<detail::pool_task_impl<Fn, R>>(Fn(std::forward<F>(f)));
    std::future<R> fut = task->future();
    std::unique_ptr<detail::pool_task> erased = std::move(task);
    if (!queue_.push(erased))
      throw cancelled_error("thread_pool::submit after drain() or stop()");
    return fut;
  }

  void drain() {
    queue_.close();
    join();
  }

  void stop() noexcept {
    for (auto& t : threads_) t.request_stop();
    queue_.close();
    queue_.clear();  // destroys queued tasks -> their futures throw cancelled_error
    join();
  }

  [[nodiscard]] std::size_t size() const noexcept { return threads_.size(); }

  // Index of the calling pool thread in [0, size()), or -1 outside any pool.
  static int worker_index() noexcept { return current_index(); }

 private:
  static int& current_index() noexcept {
    thread_local int index = -1;
    return index;
  }

  void work(std::stop_token stop, std::size_t index) {
    current_index() = static_cast<int>(index);
    while (auto task = queue_.pop(stop)) (*task)->run(stop);
  }

  void join() noexcept {
    for (auto& t : threads_)
      if (t.joinable()) t.join();
  }

  bounded_queue<std::unique_ptr<detail::pool_task>> queue_;
  std::vector<std::jthread> threads_;
};

}  // namespace gpufeed
