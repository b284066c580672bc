// gpufeed — unit_reads' read-ahead (unit_reads.hpp has the class and its contract): the units
// will_need advises and those after a unit entered in sequential mode are queued, and up to
// ahead_requests threads per object fetch them while they fit. A unit the local copy holds (the
// node-local cache) is not fetched ahead: its reads go straight to the local copy, and a fetch
// would only copy its bytes through a unit. Whether it holds one is asked of the file system,
// never under the object's lock.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "gpufeed/detail/remote/unit_reads.hpp"

namespace gpufeed::detail::remote {

inline void unit_reads::will_need(std::uint64_t offset, std::uint64_t bytes) const noexcept {
  if (units_.empty() || mode_.load(std::memory_order_relaxed) == unit_mode::each_read ||
      bytes == 0)
    return;
  try {
    std::vector<std::size_t> wanted;
    for (std::size_t k = first_after(offset);
         k < units_.size() && extents_[k].begin < offset + bytes; ++k)
      if (!held_locally(k)) wanted.push_back(k);
    std::lock_guard<std::mutex> g(mu_);
    if (stop_) return;
    for (const std::size_t k : wanted)
      if (units_[k].state == unit::absent) queue_.push_back({k, units_[k].fetched});
    start_read_ahead();
  } catch (...) {  // advice only: no thread, no memory
  }
}

inline void unit_reads::start_read_ahead() const noexcept {
  while (!stop_ && !closed_ && ahead_threads_ < std::min(ahead_requests, queue_.size())) {
    try {
      std::thread([this] { read_ahead(); }).detach();
      ++ahead_threads_;
    } catch (...) {  // no thread: the reads fetch what the read-ahead does not
      return;
    }
  }
}

inline void unit_reads::queue_after(std::size_t k) const noexcept {
  try {
    for (std::size_t j = k + 1; j < units_.size() && j <= k + ahead_requests; ++j)
      if (units_[j].state == unit::absent) queue_.push_back({j, units_[j].fetched});
  } catch (...) {  // no memory: no read-ahead
  }
  start_read_ahead();
}

inline void unit_reads::read_ahead() const noexcept {
  std::unique_lock<std::mutex> g(mu_);
  while (!stop_ && !closed_ && !queue_.empty()) {
    const held_unit h = queue_.front();
    queue_.pop_front();
    const unit& u = units_[h.k];
    const auto due = [&] {
      return u.state == unit::absent && u.fetched == h.fetched && held_ + length(h.k) <= hold_;
    };
    if (!due()) continue;
    if (local_.holds) {  // asked without the lock: file system calls
      g.unlock();
      const bool local = held_locally(h.k);
      g.lock();
      if (local || !due() || stop_ || closed_) continue;
    }
    (void)fetch(h.k, g, true);
  }
  --ahead_threads_;
  cv_.notify_all();  // under the lock: the destructor and close() wait for none running
}

}  // namespace gpufeed::detail::remote
