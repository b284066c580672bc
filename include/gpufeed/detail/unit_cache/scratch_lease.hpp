// gpufeed — one reader's decode scratch, held within the source's decoded-chunk budget
// (decode_scratch.hpp explains the accounting and why it cannot deadlock).
//
// A decode first works out what its buffers must hold (a scratch_need: for an HDF5 chunk,
// detail/hdf5/scratch_need.hpp: the chunk's stored bytes, and for each filter undone before the
// last, which writes the output, an intermediate buffer, alternating between two). When the
// budget cannot hold that beside everything in use, the decode runs outside it, one at a time
// (decode_scratch.hpp).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>

#include "gpufeed/detail/unit_cache/decode_scratch.hpp"
#include "gpufeed/detail/unit_cache/shared_chunk_cache.hpp"

namespace gpufeed::detail::unit_cache {

// Bytes each scratch buffer needs for one decode (a chunk's stored bytes, two filter stages).
struct scratch_need {
  std::size_t stored = 0, a = 0, b = 0;
  [[nodiscard]] std::size_t total() const noexcept { return stored + a + b; }
};

// A reader's scratch_account, registered with its cache for the lease's life. Movable.
class scratch_lease {
 public:
  explicit scratch_lease(shared_chunk_cache& cache)
      : cache_(&cache), account_(std::make_unique<scratch_account>()) {
    cache.scratch().add(account_.get());
  }
  scratch_lease(scratch_lease&&) noexcept = default;
  scratch_lease& operator=(scratch_lease&&) = delete;
  ~scratch_lease() {
    if (!account_) return;
    cache_->scratch().remove(account_.get());  // after this nobody else touches the account
    cache_->release_scratch(account_->free_buffers());
  }

  // The buffers sized for one decode, held (and, inside the budget, counted) until its end.
  class use {
   public:
    use(use&&) = delete;
    ~use() {
      if (overflow_.owns_lock()) {  // decoded outside the budget: freed now
        (void)lease_->account_->free_buffers();
        overflow_.unlock();
      }
      own_.unlock();  // idle from here: another reader may free it for room
    }
    [[nodiscard]] scratch_account& account() const noexcept { return *lease_->account_; }

   private:
    friend class scratch_lease;
    use(scratch_lease* l, std::unique_lock<std::mutex> own, std::unique_lock<std::mutex> over)
        : lease_(l), own_(std::move(own)), overflow_(std::move(over)) {}
    scratch_lease* lease_;
    std::unique_lock<std::mutex> own_, overflow_;
  };

  // Sizes the buffers for `need`: within the budget when it can hold them (growing reserves
  // first), else outside it, one decode at a time. Throws only bad_alloc.
  use begin(const scratch_need& need) {
    scratch_account& a = *account_;
    std::unique_lock own(a.mutex);
    if (a.counted && a.stored.capacity() >= need.stored && a.a.capacity() >= need.a &&
        a.b.capacity() >= need.b)
      return use(this, std::move(own), {});
    const std::size_t ws = std::max(a.stored.capacity(), need.stored);
    const std::size_t wa = std::max(a.a.capacity(), need.a);
    const std::size_t wb = std::max(a.b.capacity(), need.b);
    cache_->release_scratch(a.free_buffers());  // hold nothing while asking for room
    if (cache_->reserve_scratch(ws + wa + wb, a)) {
      a.counted = ws + wa + wb;
      try {
        size(a, ws, wa, wb);
      } catch (...) {
        cache_->release_scratch(a.free_buffers());
        throw;
      }
      return use(this, std::move(own), {});
    }
    std::unique_lock over(cache_->scratch_overflow());
    try {
      size(a, need.stored, need.a, need.b);  // uncounted (counted stays 0), freed by ~use
    } catch (...) {
      (void)a.free_buffers();
      throw;
    }
    return use(this, std::move(own), std::move(over));
  }

  // Frees the buffers when they hold more than `keep` bytes.
  void release(std::size_t keep) noexcept {
    std::lock_guard own(account_->mutex);
    if (account_->capacity() <= keep) return;
    cache_->release_scratch(account_->free_buffers());
  }

 private:
  static void size(scratch_account& a, std::size_t s, std::size_t x, std::size_t y) {
    if (s) (void)a.stored.resize(s);
    if (x) (void)a.a.resize(x);
    if (y) (void)a.b.resize(y);
  }

  shared_chunk_cache* cache_;
  std::unique_ptr<scratch_account> account_;
};

}  // namespace gpufeed::detail::unit_cache
