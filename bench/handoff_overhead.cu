// handoff_overhead: what the device target's per-batch hand-off costs on the consumer's stream.
//
// The loader adds, per batch, a cudaStreamWaitEvent on the batch's `ready` event and event records
// (the `consumed` event at release; telemetry's timing events around the wait and at release).
// When the model is the bottleneck these sit between two model kernels, so their GPU time is
// added to every step. This program runs the same spin kernel back to back with and without those
// operations, on the same stream in the same run, and prints the GPU time each variant adds per
// step. It needs a GPU (exits 77 without one).
//
//   handoff_overhead [steps=4000]
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "gpufeed/cuda/check.hpp"
#include "gpufeed/cuda/device.hpp"
#include "gpufeed/cuda/event.hpp"
#include "gpufeed/cuda/stream.hpp"

namespace {

using gpufeed::cuda::event;
using gpufeed::cuda::stream;

__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// One block per SM, each resident until spin_ns have passed since it started (the bench's model).
__global__ void spin_kernel(unsigned long long spin_ns) {
  const unsigned long long t0 = global_ns();
  if (threadIdx.x == 0)
    while (global_ns() - t0 < spin_ns) {
    }
}

enum class variant { kernel_only, handoff, handoff_timed };

const char* name(variant v) {
  switch (v) {
    case variant::kernel_only: return "kernel only";
    case variant::handoff: return "+ wait(ready) + record(consumed)";
    case variant::handoff_timed: return "+ telemetry's 3 timing events";
  }
  return "?";
}

struct rig {
  stream consumer, producer;
  std::vector<event> ready, consumed;            // ring of 8, like device slots
  std::vector<event> wait_start, wait_end, released;  // ring of 64, like consumer_timing
  int sms = 1;

  rig() {
    for (int k = 0; k < 8; ++k) {
      ready.emplace_back();
      consumed.emplace_back();
    }
    for (int k = 0; k < 64; ++k) {
      wait_start.emplace_back(event::timing::enabled);
      wait_end.emplace_back(event::timing::enabled);
      released.emplace_back(event::timing::enabled);
    }
    sms = gpufeed::cuda::properties(0).multiprocessors;
  }

  // GPU microseconds per step for `steps` steps of `spin_us` each.
  double run(variant v, double spin_us, int steps) {
    const auto spin = static_cast<unsigned long long>(spin_us * 1e3);
    event start(event::timing::enabled), stop(event::timing::enabled);
    spin_kernel<<<sms, 256, 0, consumer.get()>>>(spin);  // warm
    start.record(consumer);
    for (int i = 0; i < steps; ++i) {
      const std::size_t d = static_cast<std::size_t>(i) % ready.size();
      const std::size_t t = static_cast<std::size_t>(i) % released.size();
      if (v != variant::kernel_only) ready[d].record(producer);  // the copy's ready event
      if (v == variant::handoff_timed) wait_start[t].record(consumer);
      if (v != variant::kernel_only) GPUFEED_CUDA_TRY(cudaStreamWaitEvent(consumer, ready[d], 0));
      if (v == variant::handoff_timed) wait_end[t].record(consumer);
      spin_kernel<<<sms, 256, 0, consumer.get()>>>(spin);
      GPUFEED_CUDA_TRY(cudaGetLastError());
      if (v != variant::kernel_only) consumed[d].record(consumer);
      if (v == variant::handoff_timed) released[t].record(consumer);
    }
    stop.record(consumer);
    stop.synchronize();
    return static_cast<double>(event::elapsed_ms(start, stop)) * 1e3 / steps;
  }
};

}  // namespace

int main(int argc, char** argv) {
  if (!gpufeed::cuda::has_device()) {
    std::printf("handoff_overhead: skipped: %s\n", gpufeed::cuda::query().reason.c_str());
    return 77;
  }
  const int steps = argc > 1 ? std::atoi(argv[1]) : 4000;
  try {
    rig r;
    std::printf("%-36s %10s %12s %12s\n", "variant", "spin us", "step us", "added us");
    for (double spin : {20.0, 160.0, 320.0, 1300.0}) {
      const int n = spin > 500 ? steps / 8 : steps;
      double base = 0;
      for (variant v : {variant::kernel_only, variant::handoff, variant::handoff_timed}) {
        // Best of three: the machine is shared.
        double best = 1e30;
        for (int rep = 0; rep < 3; ++rep) best = std::min(best, r.run(v, spin, n));
        if (v == variant::kernel_only) base = best;
        std::printf("%-36s %10.0f %12.2f %12.2f\n", name(v), spin, best,
                    v == variant::kernel_only ? best - spin : best - base);
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "handoff_overhead: %s\n", e.what());
    return 1;
  }
  return 0;
}
