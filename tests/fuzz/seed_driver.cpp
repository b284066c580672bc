// Runs LLVMFuzzerTestOneInput without libFuzzer (any compiler), so normal builds and CTest
// exercise the fuzz target: every file named on the command line (directories: every file in
// them), then deterministic mutations of each (bit flips, byte overwrites, truncations, inserted
// and deleted bytes) — a cheap smoke fuzz under the sanitizer builds. GPUFEED_FUZZ_SECONDS bounds
// the mutations by time (each seed gets its share), so a slow sanitizer build or a loaded machine
// shortens the run instead of reaching the test's timeout; every seed itself always runs.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);
// Optional, defined by targets whose seeds are all valid inputs: nonzero when a seed is rejected.
extern "C" __attribute__((weak)) int gpufeed_fuzz_check_seed(const std::uint8_t* data,
                                                             std::size_t size);

namespace {
std::uint64_t next(std::uint64_t& s) {  // splitmix64
  std::uint64_t z = (s += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
void run(const std::vector<std::uint8_t>& v) { LLVMFuzzerTestOneInput(v.data(), v.size()); }
}  // namespace

int main(int argc, char** argv) {
  // GPUFEED_FUZZ_MUTATIONS overrides the count for targets whose inputs are slow (each
  // fuzz_hdf5_open input is a file written and opened with libhdf5).
  const char* env = std::getenv("GPUFEED_FUZZ_MUTATIONS");
  const int mutations_per_seed = env ? std::atoi(env) : 3000;
  std::vector<std::filesystem::path> files;
  for (int i = 1; i < argc; ++i) {
    const std::filesystem::path p = argv[i];
    if (std::filesystem::is_directory(p)) {
      for (const auto& e : std::filesystem::directory_iterator(p))
        if (e.is_regular_file()) files.push_back(e.path());
    } else {
      files.push_back(p);
    }
  }
  if (files.empty()) {
    std::fprintf(stderr, "usage: %s <seed file or directory>...\n", argv[0]);
    return 2;
  }
  const char* secs_env = std::getenv("GPUFEED_FUZZ_SECONDS");
  const double seconds = secs_env ? std::atof(secs_env) : 0.0;  // 0: no time bound
  const auto start = std::chrono::steady_clock::now();
  std::uint64_t state = 42, runs = 0, cut = 0;
  for (std::size_t k = 0; k < files.size(); ++k) {
    const auto& f = files[k];
    // This seed's mutations end at its share of the time budget.
    const auto deadline =
        start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                    std::chrono::duration<double>(seconds * static_cast<double>(k + 1) /
                                                  static_cast<double>(files.size())));
    std::ifstream in(f, std::ios::binary);
    const std::vector<std::uint8_t> seed{std::istreambuf_iterator<char>(in), {}};
    if (gpufeed_fuzz_check_seed && gpufeed_fuzz_check_seed(seed.data(), seed.size()) != 0) {
      std::fprintf(stderr, "%s: seed %s is rejected\n", argv[0], f.string().c_str());
      return 1;
    }
    run(seed);
    ++runs;
    for (int m = 0; m < mutations_per_seed; ++m) {
      if (seconds > 0 && std::chrono::steady_clock::now() >= deadline) {
        cut += static_cast<std::uint64_t>(mutations_per_seed - m);
        break;
      }
      std::vector<std::uint8_t> v = seed;
      const int edits = 1 + static_cast<int>(next(state) % 4);
      for (int e = 0; e < edits; ++e) {
        const std::uint64_t r = next(state);
        const std::size_t at = v.empty() ? 0 : static_cast<std::size_t>(r >> 8) % v.size();
        switch (r % 5) {
          case 0: if (!v.empty()) v[at] ^= static_cast<std::uint8_t>(1u << ((r >> 4) % 8)); break;
          case 1: if (!v.empty()) v[at] = static_cast<std::uint8_t>(r >> 40); break;
          case 2: v.resize(at); break;
          case 3: v.insert(v.begin() + static_cast<std::ptrdiff_t>(at), static_cast<std::uint8_t>(r >> 32)); break;
          default: if (!v.empty()) v.erase(v.begin() + static_cast<std::ptrdiff_t>(at)); break;
        }
      }
      run(v);
      ++runs;
    }
  }
  std::printf("%s: %llu inputs from %zu seeds, no finding", argv[0],
              static_cast<unsigned long long>(runs), files.size());
  if (cut) std::printf(" (%llu mutations left out: %.0f s time bound)",
                       static_cast<unsigned long long>(cut), seconds);
  std::printf("\n");
  return 0;
}
