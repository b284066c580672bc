// gpufeed — the easy handles of one remote object, shared by the threads that read it.
//
// A libcurl easy handle serves one thread at a time, and what makes it worth keeping is the
// connection it keeps open (keep-alive, TLS already negotiated). A reader takes a handle for one
// request and gives it back (lease), so the pool grows to the number of threads that read at
// once and no further, and a handle with a live connection is reused by whichever thread reads
// next. The mutex is held only to take or give back a handle (a few instructions against a
// network round trip); the request itself runs unlocked on the handle the thread holds alone.
//
// Chosen over a thread_local handle per object: the handles' life is the object's (close()
// drops them, and so their connections; nothing outlives the object in another thread's
// storage), and a handle freed by one thread serves another.
#pragma once

#include <mutex>
#include <utility>
#include <vector>

#include "gpufeed/detail/remote/curl_handle.hpp"

namespace gpufeed::detail::remote {

class handle_pool {
 public:
  // A handle held by one thread until the lease ends, then back in the pool. Move-only.
  class lease {
   public:
    lease(const lease&) = delete;
    lease& operator=(const lease&) = delete;
    lease(lease&& o) noexcept : pool_(std::exchange(o.pool_, nullptr)), h_(std::move(o.h_)) {}
    lease& operator=(lease&&) = delete;
    ~lease() {
      if (pool_) pool_->give_back(std::move(h_));
    }
    [[nodiscard]] CURL* get() const noexcept { return h_.get(); }

   private:
    friend class handle_pool;
    lease(handle_pool* pool, curl_handle h) noexcept : pool_(pool), h_(std::move(h)) {}
    handle_pool* pool_ = nullptr;
    curl_handle h_;
  };

  handle_pool() = default;
  handle_pool(const handle_pool&) = delete;
  handle_pool& operator=(const handle_pool&) = delete;

  // A free handle, or a new one (library_error when libcurl cannot make one). `fresh` is set when
  // the handle is new (it needs its fixed options set).
  [[nodiscard]] lease take(bool& fresh) {
    {
      std::lock_guard lock(mutex_);
      if (!free_.empty()) {
        curl_handle h = std::move(free_.back());
        free_.pop_back();
        fresh = false;
        return lease(this, std::move(h));
      }
    }
    fresh = true;
    return lease(this, curl_handle::make());  // made unlocked: curl_easy_init allocates
  }

  // Closes every free handle and its connections. Handles leased now are given back later.
  void clear() noexcept {
    std::vector<curl_handle> gone;
    {
      std::lock_guard lock(mutex_);
      gone.swap(free_);
    }
  }

 private:
  void give_back(curl_handle h) noexcept {
    if (!h) return;
    std::lock_guard lock(mutex_);
    try {
      free_.push_back(std::move(h));
    } catch (...) {  // out of memory: the handle is closed instead of kept
    }
  }

  mutable std::mutex mutex_;
  std::vector<curl_handle> free_;
};

}  // namespace gpufeed::detail::remote
