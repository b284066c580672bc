// gpufeed::detail::image — CPU decoders that share a batch's images with the calling thread: the
// JPEGs a GPU decoder routes to the CPU (progressive ones on the hardware engines, CMYK, PNGs)
// are decoded on several threads at once, while the GPU decodes the rest, instead of one by one
// on the thread that submits the batch.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "gpufeed/detail/thread_group.hpp"
#include "gpufeed/image/decoder.hpp"

namespace gpufeed::detail::image {

class host_decode_pool {
 public:
  // `threads` decoders (at least 1), the caller's among them: threads - 1 threads are started.
  explicit host_decode_pool(std::size_t threads, gpufeed::image::decoder_options o = {})
      : slots_(threads == 0 ? 1 : threads) {
    for (slot& s : slots_) s.decoder.emplace(o);
    for (std::size_t t = 1; t < slots_.size(); ++t) group_.spawn([this, t] { serve(t); });
  }
  host_decode_pool(const host_decode_pool&) = delete;
  host_decode_pool& operator=(const host_decode_pool&) = delete;
  ~host_decode_pool() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    group_.join();
  }

  [[nodiscard]] std::size_t threads() const noexcept { return slots_.size(); }

  // Calls f(k, decoder, image) once for every k in [0, n), on the pool's threads and the
  // caller's, each call with a decoder and an image no other call uses at the same time; returns
  // when every call has returned. The first exception a call throws is rethrown here, after the
  // others have finished (calls not yet started are skipped). One run at a time.
  template <class F>
  void run(std::size_t n, F&& f) {
    run(n, std::forward<F>(f), [] {});
  }

  // The same, with `lead()` run on the caller once the pool's threads have started on the calls
  // and before the caller joins them: work the caller must do itself (submitting a GPU decode
  // that blocks it) overlaps the other threads' decodes. An exception from lead() is rethrown
  // once every started call has returned, before any from the calls.
  template <class F, class L>
  void run(std::size_t n, F&& f, L&& lead) {
    run_indexed(
        n, [this, &f](std::size_t k, std::size_t t) { f(k, *slots_[t].decoder, slots_[t].image); },
        std::forward<L>(lead));
  }

  // The same with f(k, t): t < threads() names the thread running the call (the caller is 0),
  // for work that keeps per-thread state of its own.
  template <class F, class L>
  void run_indexed(std::size_t n, F&& f, L&& lead) {
    if (n == 0) {
      lead();
      return;
    }
    std::function<void(std::size_t, std::size_t)> job = std::forward<F>(f);
    {
      std::lock_guard lock(mutex_);
      job_ = &job;
      n_ = n;
      next_.store(0, std::memory_order_relaxed);
      failed_ = nullptr;
      pending_ = slots_.size() - 1;
      ++generation_;
    }
    wake_.notify_all();
    std::exception_ptr led;
    try {
      lead();
    } catch (...) {
      led = std::current_exception();
    }
    work(0);
    std::unique_lock lock(mutex_);
    done_.wait(lock, [&] { return pending_ == 0; });
    job_ = nullptr;
    if (led) {
      failed_ = nullptr;
      std::rethrow_exception(led);
    }
    if (failed_) std::rethrow_exception(std::exchange(failed_, nullptr));
  }

 private:
  struct slot {
    std::optional<gpufeed::image::image_decoder> decoder;
    gpufeed::image::rgb_image image;
  };

  // Claims indices until none is left (or a call failed).
  void work(std::size_t t) {
    for (;;) {
      const std::size_t k = next_.fetch_add(1, std::memory_order_relaxed);
      if (k >= n_) return;
      try {
        (*job_)(k, t);
      } catch (...) {
        std::lock_guard lock(mutex_);
        if (!failed_) failed_ = std::current_exception();
        next_.store(n_, std::memory_order_relaxed);
      }
    }
  }

  void serve(std::size_t t) {
    std::uint64_t seen = 0;
    for (;;) {
      {
        std::unique_lock lock(mutex_);
        wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
        if (stopping_) return;
        seen = generation_;
      }
      work(t);
      {
        std::lock_guard lock(mutex_);
        if (--pending_ == 0) done_.notify_one();
      }
    }
  }

  std::vector<slot> slots_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  const std::function<void(std::size_t, std::size_t)>* job_ = nullptr;
  std::size_t n_ = 0, pending_ = 0;
  std::atomic<std::size_t> next_{0};
  std::uint64_t generation_ = 0;
  std::exception_ptr failed_;
  bool stopping_ = false;
  thread_group group_;  // last: joined before the members its threads use are destroyed
};

}  // namespace gpufeed::detail::image
