// device_report: is there a usable GPU, and what do pinned and pageable host-to-device copies
// reach on it? The GPU half of `gpufeed doctor`, as the smallest program built on gpufeed's
// CUDA layer. Without a GPU it says why and exits 0: "no GPU" is an answer, not a failure.
#include <cstdio>
#include <exception>

#include "gpufeed/cuda/doctor/gpu_checks.hpp"

int main() {
  try {
    gpufeed::doctor_report report;
    gpufeed::cuda::add_gpu_checks(report);
    std::fputs(report.to_text().c_str(), stdout);
    return 0;
  } catch (const std::exception& e) {  // only allocation failure gets here
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
