// device_stage_bench — the workers' side of decoding on the device (docs/design.md, "GPU decode
// in the loader"), on a machine without a GPU: records per second that the loader's workers
// stage for the device (directory claims, stored chunks read into the work area, units planned,
// gather runs listed) when the device itself costs nothing. Its engine neither decodes nor
// gathers: assemble() copies the batch's head and reports every unit decoded, so the rate is
// the workers' (and the planner's, and delivery's) alone.
//
//   device_stage_bench [--mib M (512)] [--epochs E (3)] [--batch B (512)] [--prefetch P (8)]
//                      [--cache-mib C (384)] [--workers 1,2] [--dir DIR]
// Writes DIR/raw.h5 (float32 rows of 16 KiB, values that compress about 2:1) and repacks it
// with LZ4 (gpufeed pack --compress lz4: 1 MiB chunks of whole rows), then runs the loader with
// decode = device in sequential and block_shuffled order per worker count and prints records/s
// (mean over E epochs after an untimed one). The device cache (C MiB, below the data) forgets
// units between epochs, so every epoch stages its units again, as a cache smaller than the data
// set does in a long run. Exit status 0 whatever the figures.
#include <hdf5.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "gpufeed/hdf5_source.hpp"
#include "gpufeed/loader.hpp"
#include "gpufeed/pack/pack.hpp"

using namespace gpufeed;
namespace fs = std::filesystem;

namespace {

// Host memory touched when allocated, as pinned memory is: the workers' first writes to a work
// area do not fault pages in (which a pinned work area never does).
class touched_resource final : public std::pmr::memory_resource {
 public:
  static touched_resource* instance() noexcept {
    static touched_resource r;
    return &r;
  }

 private:
  void* do_allocate(std::size_t bytes, std::size_t alignment) override {
    void* p = pageable_resource::instance()->allocate(bytes, alignment);
    std::memset(p, 0, bytes);
    return p;
  }
  void do_deallocate(void* p, std::size_t bytes, std::size_t alignment) noexcept override {
    pageable_resource::instance()->deallocate(p, bytes, alignment);
  }
  bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override {
    return this == &other;
  }
};

// An engine whose device costs nothing: copies land in host slots, assemble() copies the
// batch's head only and reports every unit decoded and the gather in bounds.
class free_decode_engine final : public transfer_engine, public unit_decoder {
 public:
  std::pmr::memory_resource* staging_resource() override { return touched_resource::instance(); }
  bool delivers_in_place() const noexcept override { return false; }
  unit_decoder* decoder() noexcept override { return this; }
  void configure(std::size_t slot_bytes, std::size_t output_bytes, std::size_t slots,
                 std::size_t) override {
    for (std::size_t d = 0; d < slots; ++d) {
      slots_.emplace_back(pageable_resource::instance(), slot_bytes);
      outputs_.emplace_back(pageable_resource::instance(), std::max<std::size_t>(output_bytes, 1));
    }
    statuses_.resize(slots);
  }
  target_slot slot(std::size_t d) const override { return {slots_[d].data(), outputs_[d].data()}; }
  void copy(std::size_t d, std::size_t, std::byte* staging, std::size_t bytes,
            std::size_t token) override {
    std::lock_guard lock(mutex_);
    std::memcpy(slots_[d].data(), staging, bytes);
    statuses_[d].clear();
    done_.push_back(token);
  }
  void complete(std::size_t, std::size_t, const transform_hook& hook,
                const batch_view& view) override {
    if (hook) hook(view, nullptr);
  }
  std::size_t reclaim(std::vector<std::size_t>& done) override {
    std::lock_guard lock(mutex_);
    const std::size_t n = done_.size();
    done.insert(done.end(), done_.begin(), done_.end());
    done_.clear();
    return n;
  }
  void acquire(std::size_t, stream_handle) override {}
  void release(std::size_t, stream_handle) noexcept override {}
  void drain() noexcept override {}

  void configure_decode(std::size_t cache_bytes, std::size_t) override {
    counters_.cache_bytes = cache_bytes;
  }
  void assemble(std::size_t d, std::size_t, std::byte* staging, std::size_t head_bytes,
                const detail::device_decode::work_image& w, std::size_t token) override {
    std::lock_guard lock(mutex_);
    std::memcpy(slots_[d].data(), staging, head_bytes);
    statuses_[d].assign(w.unit_count + 1, 0);
    done_.push_back(token);
    counters_.batches += 1;
    counters_.units += w.unit_count;
    counters_.launches += w.unit_count > 0 ? 1 : 0;
    counters_.compressed_bytes += w.compressed_bytes;
  }
  std::vector<std::uint32_t> statuses(std::size_t d) override {
    std::lock_guard lock(mutex_);
    return statuses_[d];
  }
  void overwrite(std::size_t d, const std::byte* host, std::size_t bytes) override {
    std::lock_guard lock(mutex_);
    std::memcpy(slots_[d].data(), host, bytes);
  }
  device_decode_counters decode_counters() const override {
    std::lock_guard lock(mutex_);
    return counters_;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<resource_buffer> slots_, outputs_;
  std::vector<std::vector<std::uint32_t>> statuses_;
  std::vector<std::size_t> done_;
  device_decode_counters counters_;
};

constexpr std::size_t row_floats = 4096;  // 16 KiB rows

void check(long long status, const char* what) {
  if (status < 0) throw std::runtime_error(std::string("HDF5: ") + what + " failed");
}

// rows x 4096 float32, contiguous: small integers in a slow walk, which LZ4 halves or so.
void write_raw(const fs::path& file, std::uint64_t rows) {
  const hid_t f = H5Fcreate(file.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  check(f, "H5Fcreate");
  const hsize_t dims[2] = {rows, row_floats};
  const hid_t space = H5Screate_simple(2, dims, nullptr);
  const hid_t set = H5Dcreate2(f, "data", H5T_NATIVE_FLOAT, space, H5P_DEFAULT, H5P_DEFAULT,
                               H5P_DEFAULT);
  check(set, "H5Dcreate2");
  std::vector<float> block(std::size_t{1024} * row_floats);
  std::uint32_t x = 12345;
  for (std::uint64_t r0 = 0; r0 < rows; r0 += 1024) {
    const hsize_t n = std::min<std::uint64_t>(1024, rows - r0);
    for (std::size_t i = 0; i < n * row_floats; ++i) {
      x = x * 1664525u + 1013904223u;
      block[i] = static_cast<float>((i / 8) % 64) + ((x >> 28) == 0 ? 0.5f : 0.0f);
    }
    const hsize_t start[2] = {r0, 0}, count[2] = {n, row_floats};
    const hid_t fs_ = H5Dget_space(set);
    check(H5Sselect_hyperslab(fs_, H5S_SELECT_SET, start, nullptr, count, nullptr), "select");
    const hid_t ms = H5Screate_simple(2, count, nullptr);
    check(H5Dwrite(set, H5T_NATIVE_FLOAT, ms, fs_, H5P_DEFAULT, block.data()), "H5Dwrite");
    H5Sclose(ms);
    H5Sclose(fs_);
  }
  H5Dclose(set);
  H5Sclose(space);
  H5Fclose(f);
}

double run_case(const hdf5_source& src, sample_order order, std::size_t workers,
                std::size_t batch, std::size_t prefetch, std::size_t epochs,
                std::uint64_t cache_mib, loader_stats& stats) {
  loader_config c;
  c.batch_size = batch;
  c.order = order;
  c.workers = workers;
  c.prefetch = prefetch;
  c.epochs = epochs + 1;
  c.decode = decode_site::device;
  c.device_cache_bytes = cache_mib << 20;
  c.target = target([] { return std::make_unique<free_decode_engine>(); }, 0, "free decode");
  loader<hdf5_source> l(src, std::move(c));
  std::uint64_t records = 0;
  auto t0 = std::chrono::steady_clock::now();
  while (auto b = l.next()) {
    if (b->epoch() == 0) {  // untimed: the clock starts at its last batch
      t0 = std::chrono::steady_clock::now();
      continue;
    }
    records += b->size();
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  stats = l.stats();
  return s > 0 ? static_cast<double>(records) / s : 0;
}

std::vector<std::size_t> parse_list(const std::string& s) {
  std::vector<std::size_t> v;
  std::size_t at = 0;
  while (at < s.size()) {
    const std::size_t comma = s.find(',', at);
    v.push_back(std::stoul(s.substr(at, comma - at)));
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  std::uint64_t mib = 512;
  std::size_t epochs = 3, batch = 512, prefetch = 8;
  std::uint64_t cache_mib = 384;
  std::vector<std::size_t> worker_counts{1, 2};
  fs::path dir = fs::temp_directory_path() / "gpufeed_device_stage_bench";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    if (!v) {
      std::fprintf(stderr, "usage: %s [--mib M] [--epochs E] [--batch B] [--prefetch P] "
                           "[--cache-mib C] [--workers 1,2] [--dir DIR]\n", argv[0]);
      return 2;
    }
    ++i;
    if (a == "--mib") mib = std::stoull(v);
    else if (a == "--epochs") epochs = std::stoul(v);
    else if (a == "--batch") batch = std::stoul(v);
    else if (a == "--prefetch") prefetch = std::stoul(v);
    else if (a == "--cache-mib") cache_mib = std::stoull(v);
    else if (a == "--workers") worker_counts = parse_list(v);
    else if (a == "--dir") dir = v;
    else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return 2;
    }
  }
  const std::uint64_t rows = mib * 64;  // 16 KiB rows
  const fs::path packed = dir / "lz4";
  if (!fs::exists(packed / "shard-00000.h5")) {
    fs::create_directories(dir);
    write_raw(dir / "raw.h5", rows);
    pack_options o;
    o.compression = {pack_codec::lz4, 0};
    o.shuffle = false;
    o.force = true;
    repack_source from;
    from.file = dir / "raw.h5";
    repack_hdf5(from, packed, o);
    fs::remove(dir / "raw.h5");
  }
  std::vector<fs::path> shards;
  for (const auto& e : fs::directory_iterator(packed))
    if (e.path().extension() == ".h5") shards.push_back(e.path());
  std::sort(shards.begin(), shards.end());
  hdf5_source src(shards);
  std::printf("%llu records of 16 KiB (LZ4, %zu shard%s), batch %zu, prefetch %zu, %zu epochs "
              "timed, device cache %llu MiB\n",
              static_cast<unsigned long long>(src.size()), shards.size(),
              shards.size() == 1 ? "" : "s", batch, prefetch, epochs,
              static_cast<unsigned long long>(cache_mib));
  for (const sample_order order : {sample_order::sequential, sample_order::block_shuffled})
    for (const std::size_t w : worker_counts) {
      loader_stats st;
      const double rate = run_case(src, order, w, batch, prefetch, epochs, cache_mib, st);
      const auto& d = st.device_decode;
      double cpu = 0, idle = 0;
      std::uint64_t staged = 0;
      for (const worker_stats& ws : st.workers) {
        cpu += ws.read_cpu_seconds;
        idle += ws.idle_seconds;
        staged += ws.records;
      }
      std::printf("%-15s workers %zu: %10.0f records/s (%.2f GB/s)  worker CPU %.3f us/record "
                  "(every epoch), idle %.1f s  units staged %llu, no room %llu, device decode %s\n",
                  to_string(order), w, rate, rate * 16384 / 1e9,
                  staged ? cpu * 1e6 / static_cast<double>(staged) : 0.0, idle,
                  static_cast<unsigned long long>(d.units_staged),
                  static_cast<unsigned long long>(d.no_room), d.on ? "on" : "off");
    }
  return 0;
}
