#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>
namespace ab_base { void* open_feed(const char*, bool, int, std::size_t); double run_feed(void*, double); void close_feed(void*); }
namespace ab_new { void* open_feed(const char*, bool, int, std::size_t); double run_feed(void*, double); void close_feed(void*); }
static double median(std::vector<double> v) { std::sort(v.begin(), v.end()); return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2; }
int main(int argc, char** argv) {
  // ab DATA_DIR WORKERS ROUNDS SECONDS
  const std::string dir = argv[1];
  const int workers = std::atoi(argv[2]), rounds = std::atoi(argv[3]);
  const double secs = std::atof(argv[4]);
  for (int rec : {256, 16384}) {
    const std::string path = dir + "/hdf5_r" + std::to_string(rec) + "_n" + std::to_string((128 << 20) / rec) + ".h5";
    const std::size_t batch = (8u << 20) / rec;
    void* f[2][2];  // [impl][block]
    for (int b = 0; b < 2; ++b) { f[0][b] = ab_base::open_feed(path.c_str(), b, workers, batch); f[1][b] = ab_new::open_feed(path.c_str(), b, workers, batch); }
    // one untimed epoch each: populate the map
    for (int b = 0; b < 2; ++b) { ab_base::run_feed(f[0][b], 0.3); ab_new::run_feed(f[1][b], 0.3); }
    std::vector<double> r[2][2];
    for (int k = 0; k < rounds; ++k)
      for (int b = 0; b < 2; ++b) {
        r[0][b].push_back(ab_base::run_feed(f[0][b], secs));
        r[1][b].push_back(ab_new::run_feed(f[1][b], secs));
      }
    for (int i = 0; i < 2; ++i)
      for (int b = 0; b < 2; ++b) {
        auto v = r[i][b];
        std::printf("%-5s w%d %6dB %-15s median %10.0f rec/s  (%.2f GB/s)  range %.0f-%.0f  n=%zu\n", i ? "new" : "base", workers, rec,
                    b ? "block_shuffled" : "shuffled", median(v), median(v) * rec / 1e9, *std::min_element(v.begin(), v.end()), *std::max_element(v.begin(), v.end()), v.size());
      }
    for (int i = 0; i < 2; ++i) std::printf("%-5s w%d %6dB block/shuffled = %.3f\n", i ? "new" : "base", workers, rec, median(r[i][1]) / median(r[i][0]));
    // paired ratios per round (same moment): new/base
    for (int b = 0; b < 2; ++b) {
      std::vector<double> q; for (int k = 0; k < rounds; ++k) q.push_back(r[1][b][k] / r[0][b][k]);
      std::printf("new/base w%d %6dB %-15s per-round ratio median %.3f\n", workers, rec, b ? "block_shuffled" : "shuffled", median(q));
    }
    for (int b = 0; b < 2; ++b) { ab_base::close_feed(f[0][b]); ab_new::close_feed(f[1][b]); }
    std::fflush(stdout);
  }
}
