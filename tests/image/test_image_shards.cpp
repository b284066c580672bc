// Images in shards: JPEG files packed as they are (class folders -> labels) and read back byte for
// byte; Caffe LMDB Datums with encoded = true (as convert_imageset --encoded writes them) deliver
// the JPEG bytes, which the image record transform decodes; a truncated one names its shard.
#include <doctest/doctest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "expect_error.hpp"
#include "gpufeed/hdf5_source.hpp"
#include "gpufeed/image/record_transforms.hpp"
#include "gpufeed/loader.hpp"
#include "gpufeed/lmdb_source.hpp"
#include "gpufeed/pack/pack.hpp"
#include "image_test_util.hpp"
#include "lmdb_test_util.hpp"
#include "pb_writer.hpp"
#include "test_util.hpp"
#include "watchdog.hpp"

using namespace gpufeed;
using namespace std::chrono_literals;

namespace {
std::string as_string(const std::vector<std::byte>& b) {
  return {reinterpret_cast<const char*>(b.data()), b.size()};
}
loader_config config() {
  loader_config c;
  c.batch_size = 4;
  c.seed = 5;
  c.part = partition{};
  c.workers = 2;
  c.epochs = 1;
  return c;
}
}  // namespace

TEST_CASE("pack stores JPEG files as they are, labelled by class folder; the loader decodes them") {
  test::watchdog dog(120s, "pack images");
  test::temp_dir dir("imgpack");
  const auto root = dir / "photos";
  std::vector<std::vector<std::byte>> files;
  std::vector<int> classes;
  const char* names[] = {"cat", "dog", "fish"};
  for (int k = 0; k < 9; ++k) {
    std::filesystem::create_directories(root / names[k % 3]);
    files.push_back(test::cjpeg(dir.path(), test::synthetic_picture(60 + 7 * k, 50 + 3 * k, 3, k),
                                "-quality 80", "src" + std::to_string(k)));
    test::write_bytes(root / names[k % 3] / ("img" + std::to_string(k) + ".jpg"), files.back());
    classes.push_back(k % 3);
  }
  const auto inputs = list_directory(root, true);
  pack_options o;
  o.label_names = directory_labels(root);
  const pack_result r = pack(inputs, dir / "shards", o);
  hdf5_source src(r.shards);
  REQUIRE(src.size() == 9);
  std::vector<std::byte> buf;
  for (std::uint64_t i = 0; i < src.size(); ++i) {
    // pack shuffles by default: record i holds inputs[r.input_of[i]].
    const std::string name = inputs[r.input_of[i]].name;
    const int k = std::stoi(name.substr(name.find("img") + 3));
    buf.resize(src.record_size(i));
    src.read(i, buf);
    CHECK(buf == files[static_cast<std::size_t>(k)]);  // not re-encoded
    CHECK(src.label(i) == classes[static_cast<std::size_t>(k)]);
  }
  loader_config c = config();
  c.per_record = image::random_resized_crop_transform({.size = 24});
  loader<hdf5_source> l(src, c);
  std::size_t n = 0;
  while (auto b = l.next()) {
    CHECK(b->record_bytes() == 24 * 24 * 3);
    n += b->size();
  }
  CHECK(n == 9);
}

TEST_CASE("Caffe Datums with encoded = true deliver the JPEG bytes; the transform decodes them") {
  test::watchdog dog(120s, "encoded datum");
  test::temp_dir dir("imgdatum");
  test::kv_list entries;
  std::vector<std::vector<std::byte>> jpegs;
  for (int i = 0; i < 6; ++i) {
    jpegs.push_back(test::cjpeg(dir.path(), test::synthetic_picture(80, 64, 3, i), "-quality 85",
                                "d" + std::to_string(i)));
    auto bytes = jpegs.back();
    if (i == 4) bytes.resize(bytes.size() / 2);  // a truncated image in the shard
    // convert_imageset --encoded: data = the file, label, encoded; no channels/height/width.
    test::pb_writer p;
    p.bytes(4, as_string(bytes)).int32(5, 10 + i).boolean(7, true);
    entries.emplace_back(test::key8(static_cast<std::uint64_t>(i)), p.str());
  }
  const auto shard = dir / "train_lmdb";
  test::write_lmdb(shard, entries);
  lmdb_options lo;
  lo.format = lmdb_options::value_format::datum;
  lmdb_source src(shard, lo);
  std::vector<std::byte> buf;
  for (std::uint64_t i = 0; i < 6; ++i) {
    buf.resize(src.record_size(i));
    src.read(i, buf);
    if (i != 4) CHECK(buf == jpegs[i]);
    CHECK(src.label(i) == 10 + static_cast<std::int64_t>(i));
  }
  loader_config c = config();
  c.on_error = error_policy::skip;
  const image::train_crop_options o{.size = 20};
  c.per_record = image::random_resized_crop_transform(o);
  loader<lmdb_source> l(src, c);
  image::train_crop crop(o);
  std::size_t n = 0, skipped = 0;
  while (auto b = l.next()) {
    for (std::size_t k = 0; k < b->size(); ++k, ++n) {
      const std::uint64_t i = b->indices()[k];
      record_rng rng(5, 0, i);
      std::vector<std::byte> want(crop.output_bytes());
      crop(jpegs[i], rng, want);
      const auto got = b->record(k);
      CHECK(std::vector<std::byte>(got.begin(), got.end()) == want);
      CHECK(b->labels()[k] == 10 + static_cast<std::int64_t>(i));
    }
    for (const auto& s : b->skipped()) {
      ++skipped;
      CHECK(s.index == 4);
      CHECK(test::has(s.what, "corrupt JPEG"));
      CHECK(test::has(s.what, "train_lmdb"));
    }
  }
  CHECK(n == 5);
  CHECK(skipped == 1);
}
