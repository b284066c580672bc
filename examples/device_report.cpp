// device_report: is there a usable GPU, and what do pinned and pageable host-to-device copies
// reach on it? The smallest real use of gpufeed's CUDA layer. Without a GPU it says why and
// exits 0: "no GPU" is an answer, not a failure.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

#include "gpufeed/cuda/check.hpp"
#include "gpufeed/cuda/device.hpp"
#include "gpufeed/cuda/device_buffer.hpp"
#include "gpufeed/cuda/event.hpp"
#include "gpufeed/cuda/pinned.hpp"
#include "gpufeed/cuda/stream.hpp"

namespace cu = gpufeed::cuda;

// GB/s of `reps` copies of `bytes` from src to dev on stream s, timed with events.
static double h2d_rate(const void* src, cu::device_buffer& dev, std::size_t bytes, int reps,
                       cu::stream& s) {
  cu::event t0(cu::event::timing::enabled), t1(cu::event::timing::enabled);
  GPUFEED_CUDA_TRY(cudaMemcpyAsync(dev.data(), src, bytes, cudaMemcpyHostToDevice, s));  // warm
  t0.record(s);
  for (int i = 0; i < reps; ++i)
    GPUFEED_CUDA_TRY(cudaMemcpyAsync(dev.data(), src, bytes, cudaMemcpyHostToDevice, s));
  t1.record(s);
  t1.synchronize();
  return static_cast<double>(bytes) * reps / (cu::event::elapsed_ms(t0, t1) * 1e6);
}

int main() {
  try {
    const auto& q = cu::query();
    std::printf("CUDA runtime %s, driver %s\n", cu::version_string(q.runtime_version).c_str(),
                q.driver_version ? cu::version_string(q.driver_version).c_str() : "none");
    if (!q.available) {
      std::printf("no usable GPU: %s\n", q.reason.c_str());
      return 0;
    }
    for (int d = 0; d < q.device_count; ++d) {
      const auto p = cu::properties(d);
      std::printf("GPU %d: %s, %.1f GiB, compute %d.%d, %d copy engines, PCI %s\n", d,
                  p.name.c_str(), static_cast<double>(p.total_memory) / 1073741824.0, p.compute_major, p.compute_minor,
                  p.async_engines, p.pci_bus_id.c_str());
    }
    cu::stream s;
    std::printf("%12s %14s %14s\n", "copy size", "pinned GB/s", "pageable GB/s");
    for (std::size_t bytes : {std::size_t{64} << 10, std::size_t{1} << 20, std::size_t{16} << 20,
                              std::size_t{256} << 20}) {
      cu::pinned_buffer pinned(bytes);
      std::vector<std::byte> pageable(bytes);
      std::memset(pinned.data(), 1, bytes);
      std::memset(pageable.data(), 1, bytes);
      cu::device_buffer dev(bytes);
      const int reps = static_cast<int>(std::max<std::size_t>(4, (std::size_t{1} << 30) / bytes));
      std::printf("%9zu KiB %14.2f %14.2f\n", bytes >> 10, h2d_rate(pinned.data(), dev, bytes, reps, s),
                  h2d_rate(pageable.data(), dev, bytes, reps, s));
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
