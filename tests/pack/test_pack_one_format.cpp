// pack with one writer only: built once against gpufeed::pack_hdf5 and once against
// gpufeed::pack_lmdb, so each format packs, verifies and reads back without the other
// component, and asking for the missing format is a config_error naming its component.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "gpufeed/pack/pack.hpp"
#include "pack_test_util.hpp"
#include "test_util.hpp"

namespace fs = std::filesystem;
using namespace gpufeed::test;

#if defined(GPUFEED_PACK_HDF5)
#include "gpufeed/hdf5_source.hpp"
constexpr auto have = gpufeed::shard_format::hdf5, missing = gpufeed::shard_format::lmdb;
constexpr const char* missing_component = "gpufeed::pack_lmdb";
using source_type = gpufeed::hdf5_source;
#else
#include "gpufeed/lmdb_source.hpp"
constexpr auto have = gpufeed::shard_format::lmdb, missing = gpufeed::shard_format::hdf5;
constexpr const char* missing_component = "gpufeed::pack_hdf5";
using source_type = gpufeed::lmdb_source;
#endif

TEST_CASE("pack writes, verifies and reads back its one format; the other is refused") {
#if defined(GPUFEED_PACK_HDF5) && defined(GPUFEED_PACK_LMDB)
  FAIL("built with both writers: this test must see exactly one");
#endif
  temp_dir dir("pk1");
  const auto names = make_tree(dir / "in", 40, 3000, 1, 17);
  const auto inputs = gpufeed::list_directory(dir / "in", false);
  gpufeed::pack_options o;
  o.format = have;
  o.shard_bytes = 20000;
  o.verify = true;
  const gpufeed::pack_result r = gpufeed::pack(inputs, dir / "out", o);
  CHECK(r.shards.size() > 1);
  gpufeed::verify_pack(r);

  const source_type src(r.shards);
  REQUIRE(src.size() == inputs.size());
  const auto got = read_all_records(src);
  for (std::size_t i = 0; i < inputs.size(); ++i)  // record i holds input input_of[i]
    CHECK(got[i] == read_file(inputs[r.input_of[i]].path));

  o.format = missing;
  o.verify = false;
  try {
    (void)gpufeed::pack(inputs, dir / "out2", o);
    FAIL("pack accepted a format it has no writer for");
  } catch (const gpufeed::config_error& e) {
    CHECK(std::string(e.what()).find(missing_component) != std::string::npos);
  }
  CHECK_FALSE(fs::exists(dir / "out2"));
}
