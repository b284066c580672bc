// Uses a little of each component gpufeed was built with, so a broken include path, a missing
// link dependency or a header that needs something its component does not provide fails here.
#include <gpufeed/gpufeed.hpp>

#include <cstdio>

#ifdef GPUFEED_CONSUMER_HAS_CUDA
#include <gpufeed/cuda/device.hpp>
#endif
#ifdef GPUFEED_CONSUMER_HAS_HDF5
#include <hdf5.h>
#endif
#ifdef GPUFEED_CONSUMER_HAS_LMDB
#include <lmdb.h>
#endif

int main() {
  gpufeed::thread_pool pool(2);
  const int v = pool.submit([] { return 21 * 2; }).get();
  if (v != 42) return 1;
#ifdef GPUFEED_CONSUMER_HAS_CUDA
  const auto& q = gpufeed::cuda::query();
  std::printf("cuda: %s\n", q.available ? "device available" : q.reason.c_str());
#endif
#ifdef GPUFEED_CONSUMER_HAS_HDF5
  unsigned maj = 0, min = 0, rel = 0;
  H5get_libversion(&maj, &min, &rel);
  std::printf("hdf5: %u.%u.%u\n", maj, min, rel);
#endif
#ifdef GPUFEED_CONSUMER_HAS_LMDB
  std::printf("lmdb: %s\n", mdb_version(nullptr, nullptr, nullptr));
#endif
  std::printf("consumer ok\n");
  return 0;
}
