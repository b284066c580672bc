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

int main() {
  // The loader on the host target over a tiny in-memory source.
  struct numbers {
    std::uint64_t size() const { return 100; }
    std::size_t record_size(std::uint64_t) const { return 8; }
    void read(std::uint64_t i, std::span<std::byte> dst) const { std::memcpy(dst.data(), &i, 8); }
  } src;
  gpufeed::loader_config c;
  c.batch_size = 10;
  c.epochs = 1;
  c.slot_data_bytes = 80;
  c.part = gpufeed::partition{};
  gpufeed::loader<numbers> feed(src, c);
  std::uint64_t sum = 0;
  while (auto b = feed.next())
    for (auto i : b->indices()) sum += i;
  if (sum != 4950) return 1;
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
  std::printf("consumer ok\n");
  return 0;
}
