// gpufeed::detail::image — a pool of per-thread working objects (decoder + scratch) for a
// callable that workers run concurrently: each call borrows one, or makes one when all are in
// use, and gives it back. As many instances exist as calls ever ran at once (the worker count);
// the lock is held for a pointer swap, nanoseconds beside a decode.
//
// An instance whose call threw is destroyed, not given back: a decoder that failed part-way
// (a TurboJPEG handle left inside a stream libjpeg refused) must never decode the next record.
// The next call makes a fresh one; errors are rare, so the cost is one construction per error.
#pragma once

#include <exception>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

namespace gpufeed::detail::image {

template <class T, class Make>
class instance_pool {
 public:
  explicit instance_pool(Make make) : make_(std::move(make)) {}

  // Runs f(T&) on a borrowed instance; the instance returns to the pool when f returns, and is
  // destroyed when f throws.
  template <class F>
  decltype(auto) with(F&& f) {
    std::unique_ptr<T> t;
    {
      std::lock_guard lock(mutex_);
      if (!free_.empty()) {
        t = std::move(free_.back());
        free_.pop_back();
      }
    }
    if (!t) t = std::make_unique<T>(make_());
    struct give_back {
      instance_pool* pool;
      std::unique_ptr<T>* t;
      int unwinding = std::uncaught_exceptions();
      ~give_back() {
        if (std::uncaught_exceptions() > unwinding) return;  // f threw: *t is destroyed
        std::lock_guard lock(pool->mutex_);
        pool->free_.push_back(std::move(*t));
      }
    } back{this, &t};
    return std::forward<F>(f)(*t);
  }

 private:
  Make make_;
  std::mutex mutex_;
  std::vector<std::unique_ptr<T>> free_;
};

}  // namespace gpufeed::detail::image
