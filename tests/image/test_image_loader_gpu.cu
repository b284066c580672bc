// cuda::image_loader on a GPU, over pack shards of JPEGs (baseline and progressive, several
// sizes): every record exactly once per epoch; each delivered record is the CPU transform's bytes
// for that record and epoch (without nvJPEG, exactly; through nvJPEG, close); state() resumes
// exactly; a corrupt JPEG meets each error policy (throw_error names shard, record and input;
// skip leaves it out; substitute copies a good record in) while the other records are
// unchanged; holding every batch is a config_error.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <vector>

#include "gpufeed/cuda/image_loader.cuh"
#include "gpufeed/cuda/stream.hpp"
#include "gpufeed/hdf5_source.hpp"
#include "gpufeed/image/record_transforms.hpp"
#include "gpufeed/pack/pack.hpp"
#include "image_test_util.hpp"
#include "tj_encode.hpp"
#include "test_skip.hpp"
#include "test_util.hpp"

using namespace gpufeed;
namespace fs = std::filesystem;

namespace {

constexpr int size = 48;
// Through nvJPEG: the mean |difference| from the CPU transform's bytes that still shows the right
// record, crop and flip. Small crops of small synthetic pictures differ more than the 224 crops
// of test_jpeg_decode_gpu (measured up to 5.3); a wrong record, box or flip gives tens.
constexpr double close_enough = 10.0;

struct shards {
  test::temp_dir dir{"imgloader"};
  std::vector<fs::path> files;
  shards(bool corrupt) {
    const fs::path in = dir.path() / "in";
    fs::create_directories(in / "a");
    fs::create_directories(in / "b");
    for (int i = 0; i < 23; ++i) {
      const auto pic = test::synthetic_picture(60 + 7 * i, 50 + 5 * (i % 6), 3, static_cast<unsigned>(i + 1));
      const std::string name = "p" + std::to_string(i);
      auto jpeg = test::tj_encode(pic, TJSAMP_420, i % 5 == 0 ? TJFLAG_PROGRESSIVE : 0, i % 5 == 0 ? 85 : 90);
      if (corrupt && i == 11) jpeg.resize(jpeg.size() / 3);
      test::write_bytes(in / (i % 2 ? "a" : "b") / (name + ".jpg"), jpeg);
    }
    pack_options po;
    po.label_names = directory_labels(in);
    po.force = true;
    po.shard_bytes = 20000;  // several shards
    files = pack(list_directory(in, true), dir.path() / "shards", po).shards;
  }
};

std::vector<std::byte> record_bytes_of(const hdf5_source& src, std::uint64_t i) {
  std::vector<std::byte> b(src.record_size(i));
  src.read(i, b);
  return b;
}

// The CPU transform's output for record i in `epoch` (full-size decode, u8 HWC).
std::vector<std::uint8_t> want(const hdf5_source& src, std::uint64_t seed, std::uint64_t epoch,
                               std::uint64_t i) {
  image::train_crop_options o;
  o.size = size;
  o.dct_scaling = false;
  const auto bytes = record_bytes_of(src, i);
  std::vector<std::byte> out(static_cast<std::size_t>(size) * size * 3);
  record_input in;
  in.bytes = bytes;
  in.index = i;
  record_rng rng(seed, epoch, i);
  image::random_resized_crop_transform(o)(in, out, rng);
  std::vector<std::uint8_t> v(out.size());
  std::memcpy(v.data(), out.data(), out.size());
  return v;
}

cuda::image_loader_config config(image::nvjpeg_backend backend, error_policy on_error) {
  cuda::image_loader_config c;
  c.loader.batch_size = 5;
  c.loader.workers = 2;
  c.loader.seed = 9;
  c.loader.epochs = 2;
  c.loader.on_error = on_error;
  c.decode.size = size;
  c.decode.backend = backend;
  c.decode.host_threads = 2;
  return c;
}

struct delivered {
  std::uint64_t epoch, index;
  std::vector<std::uint8_t> bytes;
};

std::vector<delivered> drain(cuda::image_loader<hdf5_source>& l, std::size_t batches = 1000,
                             std::vector<skipped_record>* skipped = nullptr) {
  cuda::stream s;
  std::vector<delivered> out;
  for (std::size_t n = 0; n < batches; ++n) {
    auto b = l.next(s);
    if (!b) break;
    std::vector<std::uint8_t> host(b->size() * b->record_bytes());
    GPUFEED_CUDA_TRY(cudaMemcpyAsync(host.data(), b->data(), host.size(), cudaMemcpyDeviceToHost, s));
    GPUFEED_CUDA_TRY(cudaStreamSynchronize(s));
    for (std::size_t k = 0; k < b->size(); ++k)
      out.push_back({b->epoch(), b->indices()[k],
                     std::vector<std::uint8_t>(host.begin() + static_cast<std::ptrdiff_t>(k * b->record_bytes()),
                                               host.begin() + static_cast<std::ptrdiff_t>((k + 1) * b->record_bytes()))});
    if (skipped) skipped->insert(skipped->end(), b->skipped().begin(), b->skipped().end());
  }
  return out;
}

double mean_difference(const std::vector<std::uint8_t>& a, const std::vector<std::uint8_t>& b) {
  double sum = 0;
  for (std::size_t j = 0; j < a.size(); ++j) sum += std::abs(int{a[j]} - int{b[j]});
  return sum / static_cast<double>(a.size());
}

bool gpu_available() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

}  // namespace

TEST_CASE("image_loader: every record once per epoch, the CPU transform's bytes") {
  if (!gpu_available()) GPUFEED_SKIP_TEST("no CUDA device");
  const shards sh(false);
  const hdf5_source src(sh.files);
  for (auto backend : {image::nvjpeg_backend::none, image::nvjpeg_backend::hardware}) {
    cuda::image_loader<hdf5_source> l(src, config(backend, error_policy::throw_error));
    CAPTURE(to_string(l.capability().backend));
    const auto got = drain(l);
    std::map<std::uint64_t, std::multiset<std::uint64_t>> seen;
    for (const auto& d : got) {
      seen[d.epoch].insert(d.index);
      const auto w = want(src, 9, d.epoch, d.index);
      if (!l.capability().gpu_decode())
        CHECK(d.bytes == w);
      else
        CHECK(mean_difference(d.bytes, w) <= close_enough);
    }
    REQUIRE(seen.size() == 2);
    for (const auto& [e, ix] : seen) {
      CHECK(ix.size() == src.size());
      CHECK(std::set<std::uint64_t>(ix.begin(), ix.end()).size() == src.size());
    }
    CHECK(l.image_stats().images == 2 * src.size());
    CHECK(l.image_stats().failed == 0);
  }
}

TEST_CASE("image_loader: state() resumes after the last batch delivered") {
  if (!gpu_available()) GPUFEED_SKIP_TEST("no CUDA device");
  const shards sh(false);
  const hdf5_source src(sh.files);
  const auto c = config(image::nvjpeg_backend::none, error_policy::throw_error);
  cuda::image_loader<hdf5_source> all(src, c);
  const auto whole = drain(all);
  cuda::image_loader<hdf5_source> first(src, c);
  auto head = drain(first, 3);
  auto rc = c;
  rc.loader.resume = first.state();
  cuda::image_loader<hdf5_source> rest(src, rc);
  const auto tail = drain(rest);
  head.insert(head.end(), tail.begin(), tail.end());
  REQUIRE(head.size() == whole.size());
  for (std::size_t k = 0; k < whole.size(); ++k) {
    CAPTURE(k);
    CHECK(head[k].epoch == whole[k].epoch);
    CHECK(head[k].index == whole[k].index);
    CHECK(head[k].bytes == whole[k].bytes);
  }
}

TEST_CASE("image_loader: a corrupt JPEG under each error policy") {
  if (!gpu_available()) GPUFEED_SKIP_TEST("no CUDA device");
  const shards sh(true);
  const hdf5_source src(sh.files);
  std::uint64_t bad = src.size();
  for (std::uint64_t i = 0; i < src.size(); ++i)
    if (src.name_of(i).value_or("").find("p11.jpg") != std::string::npos) bad = i;
  REQUIRE(bad < src.size());
  for (auto backend : {image::nvjpeg_backend::none, image::nvjpeg_backend::hardware}) {
    CAPTURE(static_cast<int>(backend));
    {  // throw_error: next() rethrows the record's corrupt_error, then goes on
      auto c = config(backend, error_policy::throw_error);
      c.loader.epochs = 1;
      cuda::image_loader<hdf5_source> l(src, c);
      std::size_t thrown = 0, records = 0;
      cuda::stream s;
      for (;;) {
        try {
          auto b = l.next(s);
          if (!b) break;
          records += b->size();
          for (auto i : b->indices()) CHECK(i != bad);
        } catch (const corrupt_error& e) {
          ++thrown;
          CHECK(e.context().record == bad);
          CHECK(fs::path(e.context().file).extension() == ".h5");
          CHECK(e.context().input.find("p11.jpg") != std::string::npos);
        }
      }
      CHECK(thrown == 1);
      CHECK(records + c.loader.batch_size >= src.size());
    }
    for (auto policy : {error_policy::skip, error_policy::substitute}) {
      auto c = config(backend, policy);
      c.loader.epochs = 1;
      cuda::image_loader<hdf5_source> l(src, c);
      std::vector<skipped_record> skipped;
      const auto got = drain(l, 1000, &skipped);
      REQUIRE(skipped.size() == 1);
      CHECK(skipped[0].index == bad);
      CHECK(skipped[0].substituted == (policy == error_policy::substitute));
      CHECK(got.size() == src.size() - (policy == error_policy::skip ? 1 : 0));
      std::set<std::uint64_t> ix;
      for (const auto& d : got) {
        ix.insert(d.index);
        CHECK(d.index != bad);
        const auto w = want(src, 9, 0, d.index);
        if (backend == image::nvjpeg_backend::none || !l.capability().gpu_decode())
          CHECK(d.bytes == w);
        else
          CHECK(mean_difference(d.bytes, w) <= close_enough);
      }
      CHECK(ix.size() == src.size() - 1);
    }
  }
}

TEST_CASE("image_loader: holding every batch across next() is a config_error") {
  if (!gpu_available()) GPUFEED_SKIP_TEST("no CUDA device");
  const shards sh(false);
  const hdf5_source src(sh.files);
  auto c = config(image::nvjpeg_backend::none, error_policy::throw_error);
  c.in_flight = 2;
  cuda::image_loader<hdf5_source> l(src, c);
  auto a = l.next();
  auto b = l.next();
  REQUIRE(a);
  REQUIRE(b);
  CHECK_THROWS_AS(l.next(), config_error);
  a->release();
  CHECK(l.next());
}
