// gpufeed::detail::device_decode — one staging slot's device work while its batch is planned:
// regions of pinned memory that the batch's workers fill side by side (compressed bytes, units,
// gather runs), and what the batch took from the device cache's directory. Reset by the planner
// for each batch; read by the worker that submits it, after every task is done.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory_resource>
#include <mutex>
#include <optional>
#include <vector>

#include "gpufeed/detail/device_decode/unit_directory.hpp"
#include "gpufeed/detail/device_decode/work_image.hpp"
#include "gpufeed/memory.hpp"

namespace gpufeed::detail::device_decode {

// How much one batch may stage: compressed bytes, units and gather runs. `ahead`: the units a
// batch stages past one it must stage (0: none; device_stager::stage_record).
struct work_capacity {
  std::size_t bytes = 0, units = 0, runs = 0;
  std::size_t ahead = 0;

  // Bytes of the work area that holds it (each region 256-byte aligned, as on the device).
  [[nodiscard]] std::size_t area_bytes() const noexcept {
    return align(bytes) + align(units * sizeof(codec::gpu_unit)) +
           align(runs * sizeof(gather_run));
  }
  static constexpr std::size_t align(std::size_t n) noexcept { return (n + 255) / 256 * 256; }
};

// Units one decode launch should hold to keep the device busy: the kernels give each unit one
// warp and a unit's decode is serial, so a launch needs about as many units as the device runs
// warps at once. Sequential batches stage units ahead until their launch holds this many.
inline constexpr std::size_t launch_units = 4096;

// Bands a task of the batch stages ahead (device_stager::stage_ahead): units [first, last] of
// shard `shard` (numbered from key_base in the source). The batch's other tasks help read them
// once their own records are staged, so one worker does not read them all.
struct ahead_span {
  bool active = false;
  std::size_t shard = 0;
  std::uint64_t key_base = 0, first = 0, last = 0;
};

// A unit this batch stages: its place and its units in the batch's unit list.
struct staged_unit {
  unit_ref ref;
  std::size_t first_unit = 0, unit_count = 0;
};

class batch_work {
 public:
  batch_work(std::pmr::memory_resource* mr, work_capacity cap)
      : cap_(cap), buffer_(mr, cap.area_bytes()) {}

  // Before the batch's tasks run (planner).
  void reset(std::uint64_t batch) noexcept {
    batch_ = batch;
    bytes_.store(0, std::memory_order_relaxed);
    units_.store(0, std::memory_order_relaxed);
    runs_.store(0, std::memory_order_relaxed);
    host_records_.store(false, std::memory_order_relaxed);
    pins_.clear();
    staged_.clear();
    ahead_ = {};
  }
  [[nodiscard]] std::uint64_t batch() const noexcept { return batch_; }
  [[nodiscard]] std::size_t ahead() const noexcept { return cap_.ahead; }

  // Room for n more bytes (16-aligned), units or runs: the first one's offset / index, or nullopt
  // when the region is full (the record then takes the host path). Thread-safe.
  std::optional<std::size_t> reserve_bytes(std::size_t n) {
    return reserve(bytes_, (n + 15) / 16 * 16, cap_.bytes);
  }
  std::optional<std::size_t> reserve_units(std::size_t n) { return reserve(units_, n, cap_.units); }
  std::optional<std::size_t> reserve_runs(std::size_t n) { return reserve(runs_, n, cap_.runs); }

  [[nodiscard]] std::byte* bytes() noexcept { return buffer_.data(); }
  [[nodiscard]] codec::gpu_unit* units() noexcept {
    return reinterpret_cast<codec::gpu_unit*>(buffer_.data() + work_capacity::align(cap_.bytes));
  }
  [[nodiscard]] gather_run* runs() noexcept {
    const std::size_t units_bytes = cap_.units * sizeof(codec::gpu_unit);
    return reinterpret_cast<gather_run*>(buffer_.data() + work_capacity::align(cap_.bytes) +
                                         work_capacity::align(units_bytes));
  }

  // A record of the batch was read on the host into its place in the slot's data.
  void host_record() noexcept { host_records_.store(true, std::memory_order_relaxed); }
  [[nodiscard]] bool host_records() const noexcept {
    return host_records_.load(std::memory_order_relaxed);
  }

  // The units the batch pinned, each once (filled by unit_directory::acquire under its lock):
  // released when the batch is submitted; checked by unit_directory::poisoned at delivery.
  [[nodiscard]] std::vector<unit_ref>& pins() noexcept { return pins_; }

  void add_staged(const staged_unit& s) {
    std::lock_guard lock(mutex_);
    staged_.push_back(s);
  }
  [[nodiscard]] const std::vector<staged_unit>& staged() const noexcept { return staged_; }

  // The bands the batch stages ahead (ahead_span): published by the task that found them, read by
  // the others. Thread-safe.
  void publish_ahead(const ahead_span& a) {
    std::lock_guard lock(mutex_);
    ahead_ = a;
  }
  [[nodiscard]] ahead_span ahead_work() {
    std::lock_guard lock(mutex_);
    return ahead_;
  }

  // The work for the device, once every task is done. With `gather` false the runs are left out:
  // the batch was read on the host after all, and only its staged units (which later batches may
  // gather from) are decoded.
  [[nodiscard]] work_image image(bool gather = true) noexcept {
    work_image w;
    w.compressed = bytes();
    w.compressed_bytes = used(bytes_, cap_.bytes);
    w.units = units();
    w.unit_count = used(units_, cap_.units);
    w.runs = runs();
    w.run_count = gather ? used(runs_, cap_.runs) : 0;
    return w;
  }

 private:
  static std::optional<std::size_t> reserve(std::atomic<std::size_t>& used_now, std::size_t n,
                                            std::size_t cap) {
    std::size_t at = used_now.load(std::memory_order_relaxed);
    do {
      if (n > cap || at > cap - n) return std::nullopt;
    } while (!used_now.compare_exchange_weak(at, at + n, std::memory_order_relaxed));
    return at;
  }
  static std::size_t used(const std::atomic<std::size_t>& n, std::size_t cap) noexcept {
    const std::size_t u = n.load(std::memory_order_acquire);
    return u < cap ? u : cap;
  }

  work_capacity cap_;
  resource_buffer buffer_;
  std::uint64_t batch_ = 0;
  std::atomic<std::size_t> bytes_{0}, units_{0}, runs_{0};
  std::atomic<bool> host_records_{false};
  std::mutex mutex_;
  std::vector<unit_ref> pins_;
  std::vector<staged_unit> staged_;
  ahead_span ahead_;
};

}  // namespace gpufeed::detail::device_decode
