// A per-record transform that throws, over lazily opened HDF5 shards: the error names the
// record's shard without opening any other shard, and a shard that cannot be opened (damaged or
// missing) meanwhile is its own records' error under the loader's policy, never std::terminate.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "expect_error.hpp"
#include "fd_count.hpp"
#include "gpufeed/hdf5_source.hpp"
#include "gpufeed/loader.hpp"
#include "gpufeed/pack/detail/manifest.hpp"
#include "h5_writer.hpp"
#include "test_util.hpp"

using namespace gpufeed;
namespace fs = std::filesystem;

namespace {

constexpr std::uint64_t rows = 100;  // records per shard
constexpr std::uint64_t bad_record = 5;

// `count` shards of `rows` int32 x 10 records (record i's first value is i), and pack's
// manifest listing them as pack does: a lazy source opens only the first until a record of
// another is read.
std::vector<fs::path> write_shards(const fs::path& dir, int count) {
  detail::pack::manifest_data m;
  m.format = "hdf5";
  std::vector<fs::path> paths;
  for (int k = 0; k < count; ++k) {
    paths.push_back(dir / ("t-" + std::to_string(k) + ".h5"));
    std::vector<std::int32_t> v(rows * 10);
    for (std::size_t j = 0; j < v.size(); ++j)
      v[j] = static_cast<std::int32_t>(static_cast<std::uint64_t>(k) * rows + j / 10);
    {
      test::h5_file f(paths.back());
      test::dataset_spec s;
      s.file_type = H5T_STD_I32LE;
      s.mem_type = H5T_NATIVE_INT32;
      s.dims = {rows, 10};
      f.add(s, v);
    }
    detail::pack::manifest_shard e;
    e.file = paths.back().filename().string();
    e.records = rows;
    e.max_record = 40;
    e.band_rows = 0;  // uncompressed: the loader's decode-unit sampling opens nothing
    m.shards.push_back(e);
  }
  std::ofstream(dir / "manifest.json") << detail::pack::manifest_text(m);
  return paths;
}

// Copies the record, and throws a plain std::runtime_error for record bad_record.
record_transform copy_but_bad() {
  return record_transform::fixed(40, [](const record_input& in, std::span<std::byte> out,
                                        record_rng&) {
    if (in.index == bad_record) throw std::runtime_error("transform refuses this record");
    std::memcpy(out.data(), in.bytes.data(), 40);
  });
}

loader_config config(error_policy policy) {
  loader_config c;
  c.batch_size = 10;
  c.order = sample_order::sequential;
  c.part = partition{};
  c.epochs = 1;
  c.workers = 2;
  c.prefetch = 2;
  c.on_error = policy;
  c.per_record = copy_but_bad();
  return c;
}

}  // namespace

TEST_CASE("a transform error opens no other shard: the file is named from the shard table") {
  test::temp_dir dir("xferopen");
  const auto paths = write_shards(dir.path(), 4);
  const hdf5_source src(paths);
  REQUIRE(src.shards_opened() == 1);
  CHECK(src.file_of(rows + 3) == paths[1]);  // naming a shard does not open it
  CHECK(src.shards_opened() == 1);
  {
    // Batches of 10 from record 0, at most 2 planned ahead of the consumer: every batch this
    // loader reads lies in shard 0 (records 0..99).
    loader<hdf5_source> l(src, config(error_policy::throw_error));
    const std::string what = test::error_of<error>([&] { (void)l.next(); });
    CHECK(test::has(what, "record transform failed: transform refuses this record"));
    CHECK(test::has(what, "file '" + paths[0].string() + "', record 5"));
  }
  CHECK(src.shards_opened() == 1);
  CHECK(test::fds_under(fs::canonical(dir.path())) == 1);
}

TEST_CASE("a transform error while another shard cannot be opened: the policy applies, no abort") {
  for (const bool missing : {false, true}) {
    CAPTURE(missing);
    test::temp_dir dir("xferbad");
    const auto paths = write_shards(dir.path(), 3);
    if (missing)
      fs::remove(paths[1]);
    else
      std::ofstream(paths[1], std::ios::trunc) << "not HDF5\n";
    const hdf5_source src(paths);  // the manifest stands in for shard 1 until it is used
    {
      loader<hdf5_source> l(src, config(error_policy::skip));
      std::vector<std::uint64_t> seen;
      std::uint64_t transform_skipped = 0, shard_skipped = 0;
      while (auto b = l.next()) {
        for (std::size_t k = 0; k < b->size(); ++k) {
          std::int32_t first = 0;
          std::memcpy(&first, b->record(k).data(), 4);
          CHECK(first == static_cast<std::int32_t>(b->indices()[k]));
          seen.push_back(b->indices()[k]);
        }
        for (const auto& s : b->skipped()) {
          if (s.index == bad_record) {
            ++transform_skipped;
            CHECK(test::has(s.what, "transform refuses this record"));
            CHECK(test::has(s.what, "file '" + paths[0].string() + "'"));
          } else {
            shard_skipped += s.index / rows == 1 && test::has(s.what, paths[1].string());
          }
        }
      }
      CHECK(transform_skipped == 1);
      CHECK(shard_skipped == rows);
      CHECK(seen.size() == 2 * rows - 1);  // shards 0 and 2, but record 5
    }
    loader<hdf5_source> l(src, config(error_policy::throw_error));
    const std::string what = test::error_of<error>([&] { (void)l.next(); });
    CHECK(test::has(what, "transform refuses this record"));
    CHECK(test::has(what, "file '" + paths[0].string() + "', record 5"));
  }
}
