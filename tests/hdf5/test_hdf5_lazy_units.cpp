// Decode units from pack's manifest: a loader with the block_shuffled order builds its units
// over the whole source at construction, asking decode_unit() along the record space. With
// band_rows in the manifest, an unopened shard answers from it, so construction opens no shard
// beyond the first, and the units, the answers and the epoch's order are those of an eagerly
// opened source; a manifest whose band height no longer matches is a format_error naming the
// shard when it opens.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "expect_error.hpp"
#include "gpufeed/hdf5_source.hpp"
#include "gpufeed/loader.hpp"
#include "gpufeed/pack/detail/manifest.hpp"
#include "h5_writer.hpp"
#include "hdf5_test_util.hpp"
#include "test_util.hpp"

namespace loading = gpufeed::detail::loading;

using namespace gpufeed;
using gpufeed::test::dataset_spec;
using gpufeed::test::h5_file;
namespace fs = std::filesystem;

namespace {

constexpr int shard_count = 12;
constexpr std::uint64_t rows = 60, band = 20;
constexpr std::size_t row = 16384;  // bytes per record: storage blocks of 64 records

// Shards of 60 fixed rows; every third one contiguous (records decode alone), the others
// deflated in chunks of 20 whole rows. The manifest lists band_rows (`band_lie`: for shard 5).
struct shard_set {
  test::temp_dir dir{"h5units"};
  std::vector<fs::path> paths;
  std::vector<std::vector<std::byte>> expected;

  explicit shard_set(std::uint64_t band_lie = band) {
    detail::pack::manifest_data m;
    m.format = "hdf5";
    for (int k = 0; k < shard_count; ++k) {
      const bool compressed = k % 3 != 1;
      paths.push_back(dir / ("u-" + std::to_string(10000 + k) + ".h5"));
      const auto v = test::pattern<std::uint8_t>(rows * row, 70 + k);
      {
        h5_file f(paths.back());
        dataset_spec s;
        s.dims = {rows, row};
        if (compressed) {
          s.chunk = {band, row};
          s.deflate = 1;
        }
        f.add(s, v);
      }
      for (auto& r : test::rows_of(v, row)) expected.push_back(std::move(r));
      detail::pack::manifest_shard e;
      e.file = paths.back().filename().string();
      e.records = rows;
      e.max_record = e.min_record = row;
      e.band_rows = compressed ? (k == 5 ? band_lie : band) : 0;
      m.shards.push_back(e);
    }
    std::ofstream(dir / "manifest.json") << detail::pack::manifest_text(m);
  }
};

loader_config block_config() {
  loader_config c;
  c.batch_size = 16;
  c.order = sample_order::block_shuffled;
  c.seed = 9;
  c.shuffle_window = 3;
  c.part = partition{};
  c.epochs = 1;
  c.workers = 2;
  return c;
}

// The epoch's record sequence, each record's bytes checked.
std::vector<std::uint64_t> epoch_of(loader<hdf5_source>& l, const shard_set& d) {
  std::vector<std::uint64_t> seq;
  while (auto b = l.next())
    for (std::size_t j = 0; j < b->size(); ++j) {
      const std::uint64_t i = b->indices()[j];
      const auto r = b->record(j);
      REQUIRE(r.size() == row);
      CHECK(std::memcmp(r.data(), d.expected[i].data(), row) == 0);
      seq.push_back(i);
    }
  return seq;
}

}  // namespace

TEST_CASE("block_shuffled over manifest'd shards: construction opens one shard, same epoch") {
  const shard_set d;
  hdf5_options eager_open;
  eager_open.open = hdf5_options::open_kind::eager;
  const hdf5_source eager(d.paths, eager_open);
  const hdf5_source lazy(d.paths);
  REQUIRE(lazy.size() == shard_count * rows);
  // Every answer equals the opened shard's, and asking opens nothing.
  for (std::uint64_t i = 0; i < lazy.size(); ++i) REQUIRE(lazy.decode_unit(i) == eager.decode_unit(i));
  CHECK(lazy.decode_unit(0) == lazy.decode_unit(band - 1));
  CHECK(lazy.decode_unit(band - 1) != lazy.decode_unit(band));
  CHECK(lazy.decode_unit(rows) != lazy.decode_unit(rows + 1));  // shard 1: contiguous
  CHECK(lazy.decode_unit(rows - 1) != lazy.decode_unit(2 * rows));
  CHECK(detail::records_per_decode_unit(lazy) == detail::records_per_decode_unit(eager));
  CHECK(lazy.shards_opened() == 1);

  // What a loader's construction plans before its threads start (the units, the median unit
  // length): nothing more opens.
  {
    const auto setup = loading::resolve_config<default_options>(lazy, block_config());
    CHECK(setup.order.units().size() > 1);
    CHECK(lazy.shards_opened() == 1);
  }
  loader<hdf5_source> le(eager, block_config());
  loader<hdf5_source> ll(lazy, block_config());
  const record_units& ue = le.batch_sampler().units();
  const record_units& ul = ll.batch_sampler().units();
  REQUIRE(ul.size() == ue.size());
  for (std::uint64_t u = 0; u < ue.size(); ++u) CHECK(ul.begin(u) == ue.begin(u));
  CHECK(ue.size() > 1);
  const auto seq_e = epoch_of(le, d);
  const auto seq_l = epoch_of(ll, d);
  CHECK(seq_l.size() == lazy.size());
  CHECK(seq_l == seq_e);
  CHECK(lazy.shards_opened() == shard_count);
}

TEST_CASE("a manifest's band height that no longer matches: format_error naming the shard") {
  const shard_set d(/*band_lie=*/30);
  const hdf5_source src(d.paths);
  const std::uint64_t at = 5 * rows;
  CHECK(src.decode_unit(at + 19) == src.decode_unit(at + 29));  // the manifest's bands of 30
  CHECK(src.shards_opened() == 1);
  std::vector<std::byte> buf(row);
  const std::string e = test::error_of<format_error>([&] { src.read(at, buf); });
  CHECK(test::has(e, d.paths[5].string()));
  CHECK(test::has(e, "the shard changed since"));
  src.read(at + rows, buf);  // shard 6 still reads
  CHECK(std::memcmp(buf.data(), d.expected[at + rows].data(), row) == 0);
}
