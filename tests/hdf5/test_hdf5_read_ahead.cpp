// hdf5_source::will_need: the extents advised (posix_fadvise WILLNEED, observed through
// detail::hdf5::advise_observer) are exactly the bytes the records will read — one extent of
// contiguous data; every chunk of the bands covering the rows, adjacent chunks merged — clipped
// to the source, across shards; fallback shards are not advised.
#include <doctest/doctest.h>

#include <hdf5.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "gpufeed/hdf5_source.hpp"
#include "h5_writer.hpp"
#include "test_util.hpp"

using namespace gpufeed;
using gpufeed::test::dataset_spec;
using gpufeed::test::h5_file;
using gpufeed::test::pattern;

namespace {

using extents = std::map<std::string, std::vector<std::pair<std::uint64_t, std::uint64_t>>>;

class advice_log {
 public:
  advice_log() { detail::hdf5::advise_observer.store(&observe); }
  ~advice_log() { detail::hdf5::advise_observer.store(nullptr); }
  advice_log(const advice_log&) = delete;
  advice_log& operator=(const advice_log&) = delete;
  static extents take() {
    std::lock_guard lock(mutex_);
    return std::exchange(log_, {});
  }

 private:
  static void observe(const std::string& path, std::uint64_t at, std::uint64_t n) noexcept {
    std::lock_guard lock(mutex_);
    log_[path].emplace_back(at, at + n);
  }
  static inline std::mutex mutex_;
  static inline extents log_;
};

// [begin, end) file extents of chunks [k0, k1) (row-major) of "data", adjacent ones merged.
std::vector<std::pair<std::uint64_t, std::uint64_t>> chunk_extents(const std::string& path,
                                                                   hsize_t k0, hsize_t k1) {
  using gpufeed::test::h5_check;
  using gpufeed::test::h5_id;
  h5_id f(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose, "H5Fopen");
  h5_id d(H5Dopen2(f, "data", H5P_DEFAULT), H5Dclose, "H5Dopen2");
  h5_id space(H5Dget_space(d), H5Sclose, "H5Dget_space");
  std::vector<std::pair<std::uint64_t, std::uint64_t>> out;
  for (hsize_t k = k0; k < k1; ++k) {
    hsize_t origin[2] = {0, 0}, size = 0;
    unsigned mask = 0;
    haddr_t addr = 0;
    h5_check(H5Dget_chunk_info(d, space, k, origin, &mask, &addr, &size), "H5Dget_chunk_info");
    if (!out.empty() && out.back().second == addr)
      out.back().second += size;
    else
      out.emplace_back(addr, addr + size);
  }
  return out;
}

}  // namespace

TEST_CASE("contiguous and chunked shards: the extents of the records, clipped, across shards") {
  gpufeed::test::temp_dir dir("h5ahead");
  const std::string flat = (dir / "flat.h5").string(), packed = (dir / "packed.h5").string();
  {
    h5_file f(flat);
    dataset_spec s;
    s.dims = {40, 100};  // 40 records of 100 bytes
    f.add(s, pattern<std::uint8_t>(4000, 1));
  }
  {
    h5_file f(packed);
    dataset_spec s;
    s.dims = {60, 100};
    s.chunk = {8, 50};  // bands of 8 rows, two chunks each
    s.deflate = 1;
    f.add(s, pattern<std::uint8_t>(6000, 2));
  }
  hdf5_source src({flat, packed});
  REQUIRE(src.shards()[0].read_path == hdf5_read_path::pread_raw);
  REQUIRE(src.shards()[1].read_path == hdf5_read_path::pread_decode);
  const advice_log log;

  // Records 10..29 of the contiguous shard: one extent of 20 rows.
  src.will_need(10, 20);
  auto got = advice_log::take();
  REQUIRE(got.size() == 1);
  REQUIRE(got[flat].size() == 1);
  const std::uint64_t base = got[flat][0].first - 10 * 100;
  CHECK(got[flat][0].second - got[flat][0].first == 2000);

  // Records 35..54: rows 35..39 of the first shard, rows 0..14 of the second (bands 0 and 1:
  // chunks 0..3).
  src.will_need(35, 20);
  got = advice_log::take();
  CHECK(got[flat] == std::vector<std::pair<std::uint64_t, std::uint64_t>>{
                         {base + 3500, base + 4000}});
  CHECK(got[packed] == chunk_extents(packed, 0, 4));

  // Rows 17..59 of the second shard (bands 2..7, chunks 4..15), the count clipped at the end.
  src.will_need(57, 1000);
  got = advice_log::take();
  CHECK(got.count(flat) == 0);
  CHECK(got[packed] == chunk_extents(packed, 4, 16));

  // Past the end, or nothing: no advice.
  src.will_need(100, 5);
  src.will_need(3, 0);
  CHECK(advice_log::take().empty());
}

TEST_CASE("fallback shards are not advised") {
  gpufeed::test::temp_dir dir("h5ahead-fb");
  const std::string path = (dir / "compact.h5").string();
  {
    h5_file f(path);
    dataset_spec s;
    s.dims = {10, 8};
    s.compact = true;
    f.add(s, pattern<std::uint8_t>(80, 3));
  }
  hdf5_source src(path);
  REQUIRE(src.shards()[0].read_path == hdf5_read_path::h5dread_fallback);
  const advice_log log;
  src.will_need(0, 10);
  CHECK(advice_log::take().empty());
}
