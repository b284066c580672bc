// gpufeed::detail — the slot ledger: every acquire and every return of the loader's three
// resources goes through it, and nothing else touches their queues.
//
//   staging slot   host memory a batch is planned and read into (`staging` of them)
//   target slot    where a batch is delivered: device memory, or host memory (`target` of them)
//   window credit  one batch the planner may run ahead of the consumer (`prefetch` of them)
//
// The invariant, stated here once. Each slot is returned exactly once for each time it was taken
// (a second return is refused and counted in double_returns(): re-queuing it would let two
// batches share one slot). target = prefetch + max_held; staging = prefetch, plus max_held when
// the engine delivers in place (the consumer then holds staging slots). Credits bound the
// batches between the planner and the consumer by `prefetch` (returned by next() when it takes a
// batch), and next() refuses to let the consumer hold more than max_held (ready_queue::take,
// delivery.hpp), so a batch that completes always finds a free target slot, and a batch being
// planned a free staging slot: no deadlock whatever order chunks complete in.
//
// A staging slot whose copy was queued is returned by the engine (transfer_engine::reclaim, polled
// in take_staging), never by return_staging(): a batch that fails after its copy was queued only
// nudges the planner (staging_may_return()).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <stop_token>
#include <thread>
#include <vector>

#include "gpufeed/bounded_queue.hpp"

namespace gpufeed::detail::loading {

class slot_ledger {
 public:
  // How often one kind of resource was taken and returned (a refused double return is in
  // neither).
  struct tally {
    std::uint64_t taken = 0, returned = 0;
  };

  // Every slot and credit starts free.
  slot_ledger(std::size_t staging, std::size_t target, std::size_t credits)
      : credits_(credits), free_staging_(staging), free_target_(target), staging_out_(staging),
        target_out_(target) {
    for (std::size_t k = 0; k < staging; ++k) free_staging_.push(k);
    for (std::size_t d = 0; d < target; ++d) free_target_.push(d);
    for (std::size_t k = 0; k < credits; ++k) credits_.push(0);
  }

  // --- window credits: the planner takes one per batch, next() returns one per batch taken.
  // False once stopped or closed.
  bool take_credit(std::stop_token st) {
    if (!credits_.pop(st)) return false;
    credits_out_.fetch_add(1, std::memory_order_acq_rel);
    credit_tally_.taken.fetch_add(1, std::memory_order_relaxed);
    return true;
  }
  void return_credit() noexcept {
    std::size_t out = credits_out_.load(std::memory_order_acquire);
    do {
      if (out == 0) {
        double_returns_.fetch_add(1, std::memory_order_relaxed);
        return;
      }
    } while (!credits_out_.compare_exchange_weak(out, out - 1, std::memory_order_acq_rel));
    credit_tally_.returned.fetch_add(1, std::memory_order_relaxed);
    try {
      (void)credits_.try_push(0);  // never full while every credit is returned once; closed: gone
    } catch (...) {  // a queue's mutex failing: the loader is being torn down
    }
  }

  // --- staging slots: the planner takes one per batch.
  // A free staging slot, nullopt once stop is requested. `reclaim(std::vector<std::size_t>&)`
  // appends the staging slots whose copies are done (the engine's reclaim(): an event query per
  // copy in flight, never a wait); between polls the planner yields first, so a slot freed
  // microseconds later is taken at once, then waits 20 us, or, when `in_place` (the engine
  // delivers in the staging slot), until a batch is released.
  template <class Reclaim>
  std::optional<std::size_t> take_staging(std::stop_token st, bool in_place, Reclaim&& reclaim) {
    for (unsigned idle = 0;; ++idle) {
      if (auto s = free_staging_.try_pop()) {
        mark_taken(staging_out_, *s, staging_tally_);
        return s;
      }
      std::uint64_t seen;
      {
        std::lock_guard lock(return_mutex_);
        seen = returns_;
      }
      reclaimed_.clear();
      reclaim(reclaimed_);
      for (std::size_t t : reclaimed_) put_back(free_staging_, staging_out_, t, staging_tally_);
      if (!reclaimed_.empty()) continue;
      if (st.stop_requested()) return std::nullopt;
      if (idle < 64) {
        std::this_thread::yield();
        continue;
      }
      std::unique_lock lock(return_mutex_);
      const auto returned = [&] { return returns_ != seen; };
      if (in_place)
        return_cv_.wait(lock, st, returned);
      else
        return_cv_.wait_for(lock, st, std::chrono::microseconds(20), returned);
    }
  }
  // Staging slot s, taken and never copied from, may be planned again; wakes a waiting planner.
  void return_staging(std::size_t s) noexcept {
    put_back(free_staging_, staging_out_, s, staging_tally_);
    staging_may_return();
  }
  // A staging slot may have become reclaimable (a batch was released, or one whose copy was
  // queued failed): wakes a planner waiting in take_staging.
  void staging_may_return() noexcept {
    {
      std::lock_guard lock(return_mutex_);
      ++returns_;
    }
    return_cv_.notify_one();
  }

  // --- target slots: the worker that finishes a batch takes one; the batch's release (or its
  // failure before delivery) returns it. nullopt once stopped or closed.
  std::optional<std::size_t> take_target(std::stop_token st) {
    auto d = free_target_.pop(st);
    if (d) mark_taken(target_out_, *d, target_tally_);
    return d;
  }
  void return_target(std::size_t d) noexcept {
    put_back(free_target_, target_out_, d, target_tally_);
  }

  // Closes every queue: blocked threads return.
  void close() noexcept {
    credits_.close();
    free_staging_.close();
    free_target_.close();
    return_cv_.notify_all();
  }

  [[nodiscard]] tally credits() const noexcept { return read(credit_tally_); }
  [[nodiscard]] tally staging() const noexcept { return read(staging_tally_); }
  [[nodiscard]] tally target() const noexcept { return read(target_tally_); }
  // Returns refused: of a slot not taken, or of a credit with none out.
  [[nodiscard]] std::uint64_t double_returns() const noexcept {
    return double_returns_.load(std::memory_order_relaxed);
  }

 private:
  struct atomic_tally {
    std::atomic<std::uint64_t> taken{0}, returned{0};
  };
  static tally read(const atomic_tally& t) noexcept {
    return tally{t.taken.load(std::memory_order_relaxed),
                 t.returned.load(std::memory_order_relaxed)};
  }

  static void mark_taken(std::vector<std::atomic<bool>>& out, std::size_t k,
                         atomic_tally& t) noexcept {
    out[k].store(true, std::memory_order_release);
    t.taken.fetch_add(1, std::memory_order_relaxed);
  }
  // Queues slot k again unless it is already free (then the return is counted and dropped).
  void put_back(bounded_queue<std::size_t>& q, std::vector<std::atomic<bool>>& out, std::size_t k,
                atomic_tally& t) noexcept {
    if (k >= out.size() || !out[k].exchange(false, std::memory_order_acq_rel)) {
      double_returns_.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    t.returned.fetch_add(1, std::memory_order_relaxed);
    try {
      (void)q.try_push(k);  // never full: every slot index is in at most one place
    } catch (...) {  // a queue's mutex failing: the loader is being torn down
    }
  }

  bounded_queue<int> credits_;
  bounded_queue<std::size_t> free_staging_;
  bounded_queue<std::size_t> free_target_;
  std::vector<std::atomic<bool>> staging_out_;  // per slot: taken and not yet returned
  std::vector<std::atomic<bool>> target_out_;
  std::atomic<std::size_t> credits_out_{0};
  atomic_tally credit_tally_, staging_tally_, target_tally_;
  std::atomic<std::uint64_t> double_returns_{0};
  std::vector<std::size_t> reclaimed_;  // take_staging's (the planner's) alone

  std::mutex return_mutex_;
  std::condition_variable_any return_cv_;
  std::uint64_t returns_ = 0;  // staging_may_return() calls, under return_mutex_
};

}  // namespace gpufeed::detail::loading
