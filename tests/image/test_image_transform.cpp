// The ready-made image record transforms through the loader (host target): every record once per
// epoch, each output equal to train_crop run by hand with the record's (seed, epoch, record)
// generator, whatever the worker count; corrupt JPEGs follow the error policy and name shard and
// record, and fail no other record; center_crop_transform draws nothing.
#include <doctest/doctest.h>
#include <turbojpeg.h>

#include <chrono>
#include <cstring>
#include <map>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "expect_error.hpp"
#include "gpufeed/image/record_transforms.hpp"
#include "gpufeed/loader.hpp"
#include "image_test_util.hpp"
#include "tj_encode.hpp"
#include "watchdog.hpp"

using namespace gpufeed;
using namespace std::chrono_literals;

namespace {

std::vector<std::byte> encode(const test::pixels& p, int quality) {
  return test::tj_encode(p, TJSAMP_420, 0, quality);
}

struct shard_entry {
  std::string path;
  std::uint64_t first_record = 0, records = 0;
};

// JPEG records of assorted sizes in memory, in shards of 10 ("img-<n>.lmdb"); records in `bad`
// are cut to half their bytes (truncated JPEGs).
class jpeg_source {
 public:
  jpeg_source(std::uint64_t n, std::vector<std::uint64_t> bad = {}) {
    for (std::uint64_t i = 0; i < n; ++i) {
      auto j = encode(test::synthetic_picture(40 + static_cast<int>(i * 13 % 90),
                                              30 + static_cast<int>(i * 7 % 70), 3,
                                              static_cast<unsigned>(i)),
                      80);
      for (auto b : bad)
        if (b == i) j.resize(j.size() / 2);
      records_.push_back(std::move(j));
    }
    for (std::uint64_t f = 0; f < n; f += 10)
      shards_.push_back({"img-" + std::to_string(f / 10) + ".lmdb", f, std::min<std::uint64_t>(10, n - f)});
  }
  std::uint64_t size() const { return records_.size(); }
  std::size_t record_size(std::uint64_t i) const { return records_[i].size(); }
  std::size_t max_record_size() const {
    std::size_t m = 0;
    for (auto& r : records_) m = std::max(m, r.size());
    return m;
  }
  bool has_labels() const { return true; }
  std::int64_t label(std::uint64_t i) const { return static_cast<std::int64_t>(i % 5); }
  void read(std::uint64_t i, std::span<std::byte> dst) const {
    std::memcpy(dst.data(), records_[i].data(), records_[i].size());
  }
  const std::vector<shard_entry>& shards() const noexcept { return shards_; }
  const std::vector<std::byte>& bytes(std::uint64_t i) const { return records_[i]; }
  void replace(std::uint64_t i, std::vector<std::byte> b) { records_[i] = std::move(b); }

 private:
  std::vector<std::vector<std::byte>> records_;
  std::vector<shard_entry> shards_;
};

loader_config config(std::size_t workers) {
  loader_config c;
  c.batch_size = 8;
  c.seed = 99;
  c.part = partition{};
  c.workers = workers;
  c.chunk_records = 3;
  return c;
}

using outputs = std::map<std::pair<std::uint64_t, std::uint64_t>, std::vector<std::byte>>;

outputs run(const jpeg_source& src, loader_config c, std::size_t epochs) {
  loader<jpeg_source> l(src, c);
  outputs got;
  for (std::size_t e = 0; e < epochs; ++e)
    for (auto& b : l.epoch()) {
      CHECK(b.record_bytes() == 32 * 32 * 3);
      for (std::size_t k = 0; k < b.size(); ++k) {
        const auto r = b.record(k);
        CHECK(got.emplace(std::pair{e, b.indices()[k]}, std::vector<std::byte>(r.begin(), r.end()))
                  .second);
      }
    }
  return got;
}

}  // namespace

TEST_CASE("random_resized_crop_transform: each record = train_crop with its own generator, any worker count") {
  test::watchdog dog(120s, "image transform epochs");
  const jpeg_source src(45);
  const image::train_crop_options o{.size = 32};
  std::vector<outputs> runs;
  for (std::size_t workers : {1, 4}) {
    loader_config c = config(workers);
    c.per_record = image::random_resized_crop_transform(o);
    runs.push_back(run(src, c, 2));
  }
  CHECK(runs[0] == runs[1]);
  REQUIRE(runs[0].size() == 2 * 45);
  image::train_crop crop(o);
  std::size_t changed = 0;
  for (const auto& [key, out] : runs[0]) {
    const auto [epoch, i] = key;
    record_rng rng(99, epoch, i);
    std::vector<std::byte> want(crop.output_bytes());
    crop(src.bytes(i), rng, want);
    CHECK(out == want);
    changed += out != runs[0].at({1 - epoch, i});
  }
  CHECK(changed > 80);  // a fresh crop each epoch
}

TEST_CASE("a truncated JPEG: skipped with a corrupt_error naming shard and record, or thrown") {
  test::watchdog dog(120s, "image transform errors");
  const jpeg_source src(30, {17});
  loader_config c = config(3);
  c.epochs = 1;
  c.on_error = error_policy::skip;
  c.per_record = image::random_resized_crop_transform({.size = 32});
  {
    loader<jpeg_source> l(src, c);
    std::size_t records = 0, skipped = 0;
    while (auto b = l.next()) {
      records += b->size();
      for (const auto& s : b->skipped()) {
        ++skipped;
        CHECK(s.index == 17);
        CHECK(test::has(s.what, "corrupt JPEG"));
        CHECK(test::has(s.what, "file 'img-1.lmdb', record 17"));
      }
    }
    CHECK(records == 29);
    CHECK(skipped == 1);
  }
  c.on_error = error_policy::throw_error;
  loader<jpeg_source> l(src, c);
  const auto what = test::error_of<corrupt_error>([&] {
    while (auto b = l.next()) {
    }
  });
  CHECK(test::has(what, "record 17"));
}

TEST_CASE("a 12-bit JPEG fails only its own record: the decoder that refused it is not reused") {
  // Record 0 is a 12-bit JPEG (libjpeg-turbo's 8-bit decoder refuses its frame header and leaves
  // the TurboJPEG handle inside that stream); 300 good JPEGs follow, read in order.
  test::watchdog dog(120s, "image transform after a refused frame");
  jpeg_source src(301);
  src.replace(0, test::with_bad_frame(src.bytes(0), test::bad_frame::precision_12));
  const auto check_skipped = [](const skipped_record& s) {
    CHECK(s.index == 0);
    CHECK(test::has(s.what, "corrupt JPEG"));
    CHECK(test::has(s.what, "file 'img-0.lmdb', record 0"));
  };
  for (const error_policy policy : {error_policy::skip, error_policy::substitute}) {
    for (const std::size_t workers : {1, 2}) {
      CAPTURE(static_cast<int>(policy));
      CAPTURE(workers);
      loader_config c = config(workers);
      c.order = sample_order::sequential;
      c.epochs = 1;
      c.on_error = policy;
      c.per_record = image::random_resized_crop_transform({.size = 32});
      loader<jpeg_source> l(src, c);
      std::size_t records = 0, skipped = 0;
      while (auto b = l.next()) {
        records += b->size();
        for (const auto& s : b->skipped()) {
          ++skipped;
          check_skipped(s);
          CHECK(s.substituted == (policy == error_policy::substitute));
        }
      }
      CHECK(skipped == 1);
      CHECK(records == (policy == error_policy::skip ? 300u : 301u));
    }
  }
  // throw: the bad record's batch fails, every other batch is delivered whole.
  loader_config c = config(2);
  c.order = sample_order::sequential;
  c.epochs = 1;
  c.on_error = error_policy::throw_error;
  c.per_record = image::random_resized_crop_transform({.size = 32});
  loader<jpeg_source> l(src, c);
  std::size_t records = 0, failed = 0;
  for (;;) {
    try {
      auto b = l.next();
      if (!b) break;
      records += b->size();
    } catch (const corrupt_error& e) {
      ++failed;
      CHECK(test::has(e.what(), "record 0"));
    }
  }
  CHECK(failed == 1);
  CHECK(records == 301 - c.batch_size);
}

TEST_CASE("center_crop_transform = eval_crop of each record, the same every epoch") {
  test::watchdog dog(120s, "image eval transform");
  const jpeg_source src(20);
  loader_config c = config(2);
  const image::eval_crop_options o{.resize = 36, .size = 32};
  c.per_record = image::center_crop_transform(o);
  const auto got = run(src, c, 2);
  image::eval_crop crop(o);
  for (const auto& [key, out] : got) {
    std::vector<std::byte> want(crop.output_bytes());
    crop(src.bytes(key.second), want);
    CHECK(out == want);
  }
}

TEST_CASE("layout chw writes the same pixels as three planes") {
  const jpeg_source src(3);
  image::train_crop hwc({.size = 16}), chw({.size = 16, .layout = image::pixel_layout::chw});
  for (std::uint64_t i = 0; i < 3; ++i) {
    record_rng a(1, 0, i), b(1, 0, i);
    std::vector<std::byte> x(hwc.output_bytes()), y(chw.output_bytes());
    hwc(src.bytes(i), a, x);
    chw(src.bytes(i), b, y);
    for (std::size_t p = 0; p < 256; ++p)
      for (std::size_t ch = 0; ch < 3; ++ch) REQUIRE(x[p * 3 + ch] == y[ch * 256 + p]);
  }
}
