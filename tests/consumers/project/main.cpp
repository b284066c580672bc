// Uses a little of each component gpufeed was built with, so a broken include path, a missing
// link dependency or a header that needs something its component does not provide fails here.
#include <gpufeed/gpufeed.hpp>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <span>
#include <string>

#ifdef GPUFEED_CONSUMER_HAS_CUDA
#include <gpufeed/cuda/device_target.hpp>
#endif
#ifdef GPUFEED_CONSUMER_HAS_HDF5
#include <gpufeed/hdf5_source.hpp>
#include <hdf5.h>
#endif
#ifdef GPUFEED_CONSUMER_HAS_LMDB
#include <gpufeed/lmdb_source.hpp>
#include <lmdb.h>
#endif
#ifdef GPUFEED_CONSUMER_HAS_DOCTOR
#include <gpufeed/doctor/doctor.hpp>
#endif
#ifdef GPUFEED_CONSUMER_HAS_PACK
#include <gpufeed/pack/pack.hpp>
#endif

int main() {
  // The loader on the host target over a tiny in-memory source: record i holds the 8 bytes of
  // i * 3 + 1, label 100 + i. Each record's bytes and label are checked, and each index once.
  struct numbers {
    std::uint64_t size() const { return 100; }
    std::size_t record_size(std::uint64_t) const { return 8; }
    bool has_labels() const { return true; }
    std::int64_t label(std::uint64_t i) const { return 100 + static_cast<std::int64_t>(i); }
    void read(std::uint64_t i, std::span<std::byte> dst) const {
      const std::uint64_t x = i * 3 + 1;
      std::memcpy(dst.data(), &x, 8);
    }
  } src;
  gpufeed::loader_config c;
  c.batch_size = 10;
  c.epochs = 1;
  c.slot_data_bytes = 80;
  c.part = gpufeed::partition{};
  gpufeed::loader<numbers> feed(src, c);
  bool seen[100] = {};
  std::size_t records = 0;
  while (auto b = feed.next()) {
    for (std::size_t k = 0; k < b->size(); ++k, ++records) {
      const std::uint64_t i = b->indices()[k];
      const auto bytes = b->record(k);
      std::uint64_t x = 0;
      if (i >= 100 || seen[i] || bytes.size() != 8) return 1;
      seen[i] = true;
      std::memcpy(&x, bytes.data(), 8);
      if (x != i * 3 + 1 || b->labels()[k] != src.label(i)) {
        std::printf("record %llu: wrong bytes or label\n", static_cast<unsigned long long>(i));
        return 1;
      }
    }
  }
  if (records != 100) return 1;
#ifdef GPUFEED_CONSUMER_HAS_CUDA
  std::string why;
  const gpufeed::target t = gpufeed::cuda::device_or_host(0, &why);
  std::printf("cuda: %s\n", t.is_host() ? why.c_str() : t.name().c_str());
#endif
#ifdef GPUFEED_CONSUMER_HAS_HDF5
  unsigned maj = 0, min = 0, rel = 0;
  H5get_libversion(&maj, &min, &rel);
  std::printf("hdf5: %u.%u.%u\n", maj, min, rel);
  try {
    gpufeed::hdf5_source missing("no-such-shard.h5");
    return 1;
  } catch (const gpufeed::io_error& e) {
    std::printf("hdf5_source: %s\n", e.what());
  }
#endif
#ifdef GPUFEED_CONSUMER_HAS_LMDB
  std::printf("lmdb: %s\n", mdb_version(nullptr, nullptr, nullptr));
  try {
    gpufeed::lmdb_source missing("no-such-shard.lmdb");
    return 1;
  } catch (const gpufeed::error& e) {
    std::printf("lmdb_source: %s\n", e.what());
  }
#endif
#ifdef GPUFEED_CONSUMER_HAS_DOCTOR
  gpufeed::doctor_report r;
  gpufeed::add_storage_check(r, "");  // no path: a skip, measured nothing
  if (!r.find("storage")) return 1;
  std::printf("doctor: storage check added, exit code %d\n", r.exit_code());
#endif
#ifdef GPUFEED_CONSUMER_HAS_PACK
  try {
    (void)gpufeed::pack({}, "no-such-output", {});
    return 1;
  } catch (const gpufeed::config_error& e) {
    std::printf("pack: %s\n", e.what());
  }
#endif
  std::printf("consumer ok\n");
  return 0;
}
