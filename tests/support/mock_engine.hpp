// A transfer engine for host-only tests: "device" slots are host buffers and copies run on one
// background thread that takes a set time per copy, like a saturated copy engine. Like the CUDA
// engine it never blocks the planner; acquire() and a hook's complete() wait for the slot's copy,
// as a stream would wait on the device; the staging token comes back through reclaim() once the
// copy is done.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "gpufeed/memory.hpp"
#include "gpufeed/target.hpp"

namespace gpufeed::test {

class mock_engine final : public transfer_engine, public engine_probe {
 public:
  explicit mock_engine(std::chrono::microseconds copy_time) : copy_time_(copy_time) {
    thread_ = std::jthread([this](std::stop_token st) { run(st); });
  }
  ~mock_engine() override {
    drain();
    thread_.request_stop();
    cv_.notify_all();
  }

  std::pmr::memory_resource* staging_resource() override { return pageable_resource::instance(); }
  bool delivers_in_place() const noexcept override { return false; }
  engine_probe* probe() noexcept override { return this; }
  void configure(std::size_t slot_bytes, std::size_t output_bytes, std::size_t device_slots,
                 std::size_t) override {
    for (std::size_t d = 0; d < device_slots; ++d) {
      slots_.emplace_back(pageable_resource::instance(), slot_bytes);
      outputs_.emplace_back(pageable_resource::instance(), output_bytes);
    }
  }
  target_slot slot(std::size_t d) const override { return {slots_[d].data(), outputs_[d].data()}; }

  void copy(std::size_t d, std::size_t stream, std::byte* staging, std::size_t bytes,
            std::size_t token) override {
    std::lock_guard lock(mutex_);
    counters_.copies += 1;  // counted when queued, as the CUDA engine does
    counters_.bytes += bytes;
    jobs_.push_back(job{d, stream, staging, bytes, token});
    cv_.notify_all();
  }
  std::size_t reclaim(std::vector<std::size_t>& done) override {
    std::lock_guard lock(mutex_);
    const std::size_t n = done_.size();
    done.insert(done.end(), done_.begin(), done_.end());
    done_.clear();
    return n;
  }
  // The hook reads the "device" slot on the host here, so it runs once the slot's copy is done
  // (on a device, the stream orders the hook's kernels after the copy).
  void complete(std::size_t d, std::size_t, const transform_hook& hook,
                const batch_view& view) override {
    if (!hook) return;
    wait_copied(d);
    hook(view, nullptr);
  }
  // The consumer reads device slots on the host here, so acquiring one waits for its copy (a
  // real consumer's stream would wait on the ready event instead).
  void acquire(std::size_t d, stream_handle) override { wait_copied(d); }
  void release(std::size_t, stream_handle) noexcept override {}
  void drain() noexcept override {
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [&] { return jobs_.empty() && !busy_; });
  }
  transfer_counters counters() const override {
    std::lock_guard lock(mutex_);
    return counters_;
  }
  void record_copy_spans(std::size_t capacity) override { span_capacity_ = capacity; }
  std::vector<copy_span> copy_spans() override {
    std::lock_guard lock(mutex_);
    return spans_;
  }
  void range_push(const char*) noexcept override {}
  void range_pop() noexcept override {}

 private:
  struct job {
    std::size_t d, stream;
    const std::byte* staging;
    std::size_t bytes;
    std::size_t token;
  };
  void wait_copied(std::size_t d) {
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [&] {
      if (busy_ && busy_slot_ == d) return false;
      for (const job& j : jobs_)
        if (j.d == d) return false;
      return true;
    });
  }
  void run(std::stop_token st) {
    std::unique_lock lock(mutex_);
    for (;;) {
      cv_.wait(lock, [&] { return st.stop_requested() || !jobs_.empty(); });
      if (jobs_.empty()) return;
      job j = jobs_.front();
      jobs_.pop_front();
      busy_ = true;
      busy_slot_ = j.d;
      lock.unlock();
      const auto t0 = std::chrono::steady_clock::now();
      std::memcpy(slots_[j.d].data(), j.staging, j.bytes);
      std::this_thread::sleep_for(copy_time_);
      const auto t1 = std::chrono::steady_clock::now();
      lock.lock();
      done_.push_back(j.token);
      busy_ = false;
      counters_.timed_copies += 1;
      counters_.copy_seconds += std::chrono::duration<double>(t1 - t0).count();
      if (spans_.size() < span_capacity_) {
        auto ns = [](auto t) {
          return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
        };
        spans_.push_back(copy_span{j.stream, ns(t0), ns(t1), j.bytes});
      }
      cv_.notify_all();
    }
  }

  std::chrono::microseconds copy_time_;
  std::vector<resource_buffer> slots_, outputs_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<job> jobs_;
  std::vector<std::size_t> done_;
  bool busy_ = false;
  std::size_t busy_slot_ = 0;
  transfer_counters counters_;
  std::size_t span_capacity_ = 0;
  std::vector<copy_span> spans_;
  std::jthread thread_;
};

inline target mock_target(std::chrono::microseconds copy_time) {
  return target([copy_time] { return std::make_unique<mock_engine>(copy_time); }, 0, "mock");
}

}  // namespace gpufeed::test
