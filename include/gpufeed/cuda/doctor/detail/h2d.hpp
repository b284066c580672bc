// The doctor's host-to-device copy measurement: pinned against pageable, per copy size, timed
// with CUDA events on a non-blocking stream.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#include "gpufeed/cuda/check.hpp"
#include "gpufeed/cuda/device_buffer.hpp"
#include "gpufeed/cuda/event.hpp"
#include "gpufeed/cuda/pinned.hpp"
#include "gpufeed/cuda/stream.hpp"
#include "gpufeed/error.hpp"

namespace gpufeed::cuda::detail {

// Makes `device` current for its lifetime and restores the previous one.
class current_device_guard {
 public:
  explicit current_device_guard(int device) {
    GPUFEED_CUDA_TRY(cudaGetDevice(&previous_));
    GPUFEED_CUDA_TRY(cudaSetDevice(device));
  }
  current_device_guard(const current_device_guard&) = delete;
  current_device_guard& operator=(const current_device_guard&) = delete;
  ~current_device_guard() { GPUFEED_CUDA_LOG(cudaSetDevice(previous_)); }

 private:
  int previous_ = 0;
};

// GB/s of reps back-to-back copies of bytes from src to dst on s, after one untimed copy (which
// absorbs first-touch costs: page-table set-up, the driver's staging buffers).
inline double timed_h2d(const void* src, void* dst, std::size_t bytes, std::size_t reps, cudaStream_t s) {
  event t0(event::timing::enabled), t1(event::timing::enabled);
  GPUFEED_CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, s));
  t0.record(s);
  for (std::size_t i = 0; i < reps; ++i)
    GPUFEED_CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, s));
  t1.record(s);
  t1.synchronize();
  const double ms = static_cast<double>(event::elapsed_ms(t0, t1));
  return static_cast<double>(bytes) * static_cast<double>(reps) / (std::max(ms, 1e-6) * 1e6);
}

struct h2d_rate {
  std::size_t bytes = 0;
  double pinned_gbps = 0.0;
  double pageable_gbps = 0.0;
};

struct h2d_run {
  std::vector<h2d_rate> rates;  // in the order of the sizes asked for
  bool busy_confirmed = false;  // while_busy ran and the copies were still in flight when it returned
};

// Measures on device: for each size, at least 3 copies and about bytes_per_size bytes, from
// pinned and from pageable memory. Before that, if while_busy is set, it queues about 4 GiB of
// pinned copies (tens of milliseconds on a Gen5 link), waits 5 ms for the link to leave its
// idle power state, and calls while_busy while they run: the place to read the link's speed
// under load. Throws cuda_error (allocation, copy) or config_error (no sizes, a size of 0).
inline h2d_run measure_h2d_rates(int device, const std::vector<std::size_t>& sizes,
                                 std::size_t bytes_per_size, const std::function<void()>& while_busy) {
  if (sizes.empty()) throw config_error("doctor: no host-to-device copy sizes to measure");
  if (std::find(sizes.begin(), sizes.end(), std::size_t{0}) != sizes.end())
    throw config_error("doctor: a host-to-device copy size of 0 bytes");
  const current_device_guard guard(device);
  const std::size_t largest = *std::max_element(sizes.begin(), sizes.end());
  pinned_buffer pinned(largest);
  std::vector<std::byte> pageable(largest);
  device_buffer dev(largest);
  std::memset(pinned.data(), 0x5a, largest);
  std::memset(pageable.data(), 0x5a, largest);  // touch every page: no page faults in the timing
  stream s;

  h2d_run run;
  if (while_busy) {
    const std::size_t copies = std::max<std::size_t>(8, (std::size_t{4} << 30) / largest);
    for (std::size_t i = 0; i < copies; ++i)
      GPUFEED_CUDA_TRY(cudaMemcpyAsync(dev.data(), pinned.data(), largest, cudaMemcpyHostToDevice, s));
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    while_busy();
    run.busy_confirmed = !s.idle();
    s.synchronize();
  }
  for (const std::size_t bytes : sizes) {
    const std::size_t reps = std::max<std::size_t>(3, bytes_per_size / bytes);
    h2d_rate r;
    r.bytes = bytes;
    r.pinned_gbps = timed_h2d(pinned.data(), dev.data(), bytes, reps, s);
    r.pageable_gbps = timed_h2d(pageable.data(), dev.data(), bytes, reps, s);
    run.rates.push_back(r);
  }
  return run;
}

}  // namespace gpufeed::cuda::detail
