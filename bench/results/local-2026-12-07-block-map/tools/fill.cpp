#include <chrono>
#include <cstdio>
#include <vector>
#include "gpufeed/sampler.hpp"
#include "gpufeed/detail/order/units.hpp"
using namespace gpufeed;
int main(int argc, char** argv) {
  for (std::size_t rec : {256ul, 16384ul}) {
    const std::uint64_t n = (128ull << 20) / rec;
    const std::uint64_t batch = (8ull << 20) / rec;
    for (auto o : {sample_order::shuffled, sample_order::block_shuffled}) {
      sampler_options so; so.order = o; so.seed = 1; so.part = partition{0, 1};
      record_units u;
      if (o == sample_order::block_shuffled) { u = record_units::uniform(n, detail::block_records(rec)); so.window = 128; }
      sampler s(n, batch, so, u);
      std::vector<std::uint64_t> out(batch);
      std::uint64_t sum = 0;
      auto t0 = std::chrono::steady_clock::now();
      int epochs = rec == 256 ? 20 : 200;
      for (int e = 0; e < epochs; ++e)
        for (std::uint64_t b = 0; b < s.batches_per_epoch(); ++b) { s.batch(e, b, out); sum += out[0]; }
      double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
      std::printf("%zu %s: %.2f ns/record (%llu)\n", rec, to_string(o), ns / (double(n) * epochs), (unsigned long long)sum);
    }
  }
}
