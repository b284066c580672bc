// Labels flow from `pack` to the consumer without options: hdf5_source reads the `labels` dataset
// pack writes by default, the loader delivers it, and asking for labels a source does not have
// is a config_error saying what to set (it was an empty span with a null pointer, which the
// README's kernel dereferenced).
#include <doctest/doctest.h>

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "gpufeed/hdf5_source.hpp"
#include "gpufeed/loader.hpp"
#include "gpufeed/pack/pack.hpp"
#include "test_util.hpp"

using namespace gpufeed;

namespace {

// n small files; with labels, file i has label (i * 7) % 5 - 2 (negative ones included).
std::vector<pack_input> inputs(const std::filesystem::path& dir, int n, bool labelled) {
  std::filesystem::create_directories(dir);
  std::vector<pack_input> in;
  for (int i = 0; i < n; ++i) {
    pack_input p;
    p.path = dir / ("f" + std::to_string(i));
    std::ofstream(p.path) << "record " << i;
    p.name = "f" + std::to_string(i);
    if (labelled) p.label = (i * 7) % 5 - 2;
    in.push_back(std::move(p));
  }
  return in;
}

std::int64_t label_of(std::uint64_t i) { return static_cast<std::int64_t>((i * 7) % 5) - 2; }

std::string message_of(const auto& f) {
  try {
    f();
  } catch (const config_error& e) {
    return e.what();
  }
  return "";
}

loader_config config() {
  loader_config c;
  c.batch_size = 8;
  c.workers = 2;
  return c;
}

}  // namespace

TEST_CASE("a shard packed with labels, opened with default options: the labels pack wrote") {
  test::temp_dir dir("packlab");
  pack_options o;
  o.shard_bytes = 100;  // several shards: each one's labels in place
  const pack_result r = pack(inputs(dir / "in", 30, true), dir / "out", o);
  REQUIRE(r.labels);
  REQUIRE(r.shards.size() > 1);
  hdf5_source src(r.shards);
  REQUIRE(src.has_labels());
  CHECK(src.shards()[0].label_dataset == "labels");
  REQUIRE(src.size() == 30);
  // Record i holds input input_of[i] (pack shuffles by default).
  for (std::uint64_t i = 0; i < src.size(); ++i) CHECK(src.label(i) == label_of(r.input_of[i]));

  loader<hdf5_source> l(src, config());
  std::uint64_t seen = 0;
  for (const batch& b : l.epoch()) {
    REQUIRE(b.has_labels());
    REQUIRE(b.labels().size() == b.size());
    REQUIRE(b.labels().data() != nullptr);
    for (std::size_t k = 0; k < b.size(); ++k) {
      CHECK(b.labels()[k] == label_of(r.input_of[b.indices()[k]]));
      CHECK(b.host_labels()[k] == label_of(r.input_of[b.indices()[k]]));
    }
    seen += b.size();
  }
  CHECK(seen == 30);

  // An explicit "" still says "no labels".
  hdf5_options none;
  none.label_dataset = "";
  CHECK_FALSE(hdf5_source(r.shards, none).has_labels());
}

TEST_CASE("no labels in the shard: label(i) and batch::labels() are config_errors naming the fix") {
  test::temp_dir dir("packnolab");
  const pack_result r = pack(inputs(dir / "in", 12, false), dir / "out");
  REQUIRE_FALSE(r.labels);
  hdf5_source src(r.shards);
  CHECK_FALSE(src.has_labels());
  CHECK(src.shards()[0].label_dataset.empty());
  const std::string m = message_of([&] { (void)src.label(3); });
  CHECK(m.find("hdf5_options::label_dataset") != std::string::npos);
  CHECK(m.find("--labels") != std::string::npos);

  loader<hdf5_source> l(src, config());
  auto b = l.next();
  REQUIRE(b);
  CHECK_FALSE(b->has_labels());
  const std::string lm = message_of([&] { (void)b->labels(); });
  CHECK(lm.find("no labels") != std::string::npos);
  CHECK(lm.find("hdf5_options::label_dataset") != std::string::npos);
  CHECK_THROWS_AS((void)b->host_labels(), config_error);

  // Asking for a dataset by name that the shard lacks: format_error naming it.
  hdf5_options named;
  named.label_dataset = "labels";
  try {
    hdf5_source s(r.shards, named);
    FAIL("opened without the labels asked for");
  } catch (const format_error& e) {
    CHECK(std::string(e.what()).find("'labels'") != std::string::npos);
  }
}

TEST_CASE("default labels: shards that disagree (one with, one without) are a format_error") {
  test::temp_dir dir("packmixlab");
  const pack_result with = pack(inputs(dir / "in1", 5, true), dir / "with");
  const pack_result without = pack(inputs(dir / "in2", 5, false), dir / "without");
  // Eager open finds the disagreement at construction; lazy open (the default) when the second
  // shard is first used, for every use until it opens.
  hdf5_options eager;
  eager.open = hdf5_options::open_kind::eager;
  try {
    hdf5_source s(std::vector{with.shards[0], without.shards[0]}, eager);
    FAIL("mixed shards opened");
  } catch (const format_error& e) {
    CHECK(e.file() == without.shards[0].string());
    CHECK(std::string(e.what()).find("label_dataset = \"\"") != std::string::npos);
  }
  const hdf5_source lazy(std::vector{with.shards[0], without.shards[0]});
  CHECK_NOTHROW((void)lazy.label(0));
  for (int attempt = 0; attempt < 2; ++attempt) {
    try {
      (void)lazy.label(5);
      FAIL("a record of the shard without labels was labelled");
    } catch (const format_error& e) {
      CHECK(e.file() == without.shards[0].string());
      CHECK(std::string(e.what()).find("label_dataset = \"\"") != std::string::npos);
    }
  }
  hdf5_options none;
  none.label_dataset = "";
  CHECK(hdf5_source(std::vector{with.shards[0], without.shards[0]}, none).size() == 10);
}
