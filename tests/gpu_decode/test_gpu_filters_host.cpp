// The GPU path of h5py's gzip + shuffle (+ fletcher32) chunks, on the host through an emulated
// warp: the plan of a chunk's pipeline, the lanes' unshuffle and fletcher32 against the CPU
// filter functions, and whole chunks decoded byte for byte as the CPU path decodes them; corrupt,
// truncated and mis-sized chunks fail with the CPU path's words, and nothing is read or written
// outside the planned buffers (these tests run under ASan in CI).
#include <doctest/doctest.h>

#include <algorithm>
#include <memory>
#include <random>
#include <string>

#include "filter_data.hpp"

using namespace gpufeed_test;
namespace cd = gpufeed::cuda::detail;
namespace codec = gpufeed::detail::codec;

namespace {

constexpr pattern all_patterns[] = {pattern::random, pattern::runs, pattern::smooth_floats,
                                    pattern::zeros, pattern::coarse_floats};

std::string describe(layout l, std::size_t e, std::size_t n) {
  return "layout " + std::to_string(static_cast<int>(l)) + ", element " + std::to_string(e) +
         ", " + std::to_string(n) + " bytes";
}

}  // namespace

TEST_CASE("the lanes' fletcher32 is HDF5's, whatever the lane count and the data") {
  std::mt19937_64 rng(31);
  for (int round = 0; round < 3000; ++round) {
    const std::size_t n = round < 40 ? static_cast<std::size_t>(round) : rng() % 6000;
    bytes data = make_bytes(all_patterns[rng() % 5], n, rng);
    if (round % 7 == 1) std::fill(data.begin(), data.end(), 0xFF);  // sums at multiples of 65535
    if (round % 7 == 2 && n) data.back() = 0;
    const std::uint32_t cpu = h5::fletcher32(reinterpret_cast<const std::byte*>(data.data()), n);
    for (const unsigned width : {1u, 7u, 32u}) {
      cd::emulated_unit_warp warp;
      warp.width = width;
      INFO("round " << round << ", " << n << " bytes, width " << width);
      REQUIRE(warp.fletcher32(data.data(), static_cast<std::uint32_t>(n)) == cpu);
    }
  }
  // The checksum with each 16-bit half byte-swapped (HDF5 < 1.6.3) is accepted, as on the CPU.
  CHECK(cd::fletcher32_accepts(0x34127856u, 0x12345678u));
  CHECK_FALSE(cd::fletcher32_accepts(0x78563412u, 0x12345678u));
}

TEST_CASE("the lanes' unshuffle is hdf5::unshuffle, leftover bytes and small chunks included") {
  std::mt19937_64 rng(32);
  for (const std::size_t e : {0u, 1u, 2u, 3u, 4u, 5u, 8u, 16u, 100u})
    for (const std::size_t n : {0u, 1u, 2u, 7u, 8u, 9u, 15u, 16u, 17u, 100u, 1001u, 4099u}) {
      const bytes in = make_bytes(pattern::random, n, rng);
      bytes cpu(n);
      h5::unshuffle(reinterpret_cast<const std::byte*>(in.data()),
                    reinterpret_cast<std::byte*>(cpu.data()), n, e);
      for (const unsigned width : {1u, 32u}) {
        cd::emulated_unit_warp warp;
        warp.width = width;
        bytes out(n, 0xEE);
        warp.unshuffle(in.data(), out.data(), static_cast<std::uint32_t>(n),
                       static_cast<std::uint32_t>(e), static_cast<std::uint32_t>(n));
        INFO("element " << e << ", " << n << " bytes, width " << width);
        CHECK(out == cpu);
        for (std::size_t j = 0; j < n; ++j)
          REQUIRE(cd::unshuffled_byte(in.data(), static_cast<std::uint32_t>(n),
                                      static_cast<std::uint32_t>(e),
                                      static_cast<std::uint32_t>(j)) == cpu[j]);
      }
      CHECK(shuffle_bytes(cpu, e) == in);  // the test's writer is the inverse
    }
}

TEST_CASE("gzip + shuffle (+ fletcher32 either side) chunks decode on the warp as on the CPU") {
  std::mt19937_64 rng(33);
  int chunks = 0, staged = 0;
  for (const layout l : all_layouts)
    for (const std::size_t e : {1u, 2u, 4u, 8u})
      // whole elements, a size that is not a multiple of the element size, tiny chunks
      for (const std::size_t n :
           {4096 * e, 1000 * e + e / 2 + 1, e + 1, std::size_t{1}, std::size_t{70001}})
        for (const int level : {0, 1, 6}) {
          const bytes data = make_bytes(all_patterns[rng() % 5], n, rng);
          const filtered_chunk c = make_chunk(data, l, e, level);
          bytes cpu, gpu;
          INFO(describe(l, e, n) << ", level " << level);
          REQUIRE(cpu_decode_chunk(c, 0, n, cpu).ok);
          h5::gpu_chunk_plan plan;
          const codec::result r = gpu_decode_chunk(c, 0, n, gpu, &plan);
          INFO(r.message);
          REQUIRE(r.ok);
          CHECK(gpu == cpu);
          CHECK(cpu == data);
          if (plan.stage_bytes) ++staged;
          ++chunks;
        }
  CHECK(chunks == 6 * 4 * 5 * 3);
  CHECK(staged > 100);  // shuffle and a leading fletcher32 go through the stage buffer
}

TEST_CASE("the plan: units, stage bytes, and the filter mask's skipped filters") {
  std::mt19937_64 rng(34);
  const bytes data = make_bytes(pattern::smooth_floats, 4000, rng);
  std::vector<codec::gpu_unit> units(2);  // a chunk's units follow those already listed
  const filtered_chunk c = make_chunk(data, layout::shuffle_deflate_fletcher, 4, 6);
  h5::gpu_chunk_plan p =
      h5::plan_gpu_chunk(c.pipeline, 0, as_bytes(c.stored), 4000, 100, 200, 300, units);
  REQUIRE(p.status.ok);
  CHECK(p.first_unit == 2);
  REQUIRE(p.unit_count == 2);
  CHECK(units[2].kind == codec::gpu_unit_kind::fletcher32);  // first: checked first on the CPU
  CHECK(units[2].src_size == c.stored.size());
  CHECK(units[3].kind == codec::gpu_unit_kind::deflate_unshuffle);
  CHECK(units[3].src_size == c.stored.size() - 4);
  CHECK(units[3].element_size == 4);
  CHECK(units[3].stage == 300);
  CHECK(p.stage_bytes == 4000);
  const filtered_chunk old = make_chunk(data, layout::fletcher_shuffle_deflate, 8, 6);
  p = h5::plan_gpu_chunk(old.pipeline, 0, as_bytes(old.stored), 4000, 0, 0, 0, units);
  REQUIRE(p.status.ok);
  CHECK(units.back().kind == codec::gpu_unit_kind::deflate_fletcher32);
  CHECK(p.stage_bytes == 4004);
  const filtered_chunk plain = make_chunk(data, layout::deflate_fletcher, 1, 6);
  p = h5::plan_gpu_chunk(plain.pipeline, 0, as_bytes(plain.stored), 4000, 0, 0, 0, units);
  REQUIRE(p.status.ok);
  CHECK(p.stage_bytes == 0);  // inflated straight into the destination
  // Deflate skipped (bit 1 of the mask): the stored bytes are the shuffled data.
  filtered_chunk skipped;
  skipped.pipeline = {step(codec::kind::shuffle, 4), step(codec::kind::deflate)};
  skipped.stored = shuffle_bytes(data, 4);
  bytes cpu, gpu;
  REQUIRE(cpu_decode_chunk(skipped, 2u, 4000, cpu).ok);
  REQUIRE(gpu_decode_chunk(skipped, 2u, 4000, gpu, &p).ok);
  CHECK(gpu == data);
  CHECK(cpu == data);
  // Every filter skipped but a trailing fletcher32: checked, then copied.
  skipped.pipeline.push_back(step(codec::kind::fletcher32));
  skipped.stored = with_fletcher32(data);
  REQUIRE(gpu_decode_chunk(skipped, 3u, 4000, gpu, &p).ok);
  CHECK(gpu == data);
  CHECK(p.unit_count == 2);
}

TEST_CASE("pipelines without a GPU decoder are refused, and no unit is left behind") {
  using k = codec::kind;
  const bytes stored(64, 0);
  std::vector<codec::gpu_unit> units;
  const std::vector<std::vector<h5::filter_step>> refused = {
      {step(k::shuffle, 4), step(k::lz4)},                       // shuffle before LZ4
      {step(k::shuffle, 4), step(k::deflate), step(k::deflate)},  // two compressors
      {step(k::zstd)}, {step(k::blosc)}, {step(k::other)},
      {step(k::deflate), step(k::shuffle, 4)},                    // shuffle after deflate
      {step(k::fletcher32), step(k::lz4)},                        // checksum inside LZ4
      {step(k::fletcher32), step(k::fletcher32), step(k::deflate)},
  };
  for (const auto& pipeline : refused) {
    const h5::gpu_chunk_plan p =
        h5::plan_gpu_chunk(pipeline, 0, as_bytes(stored), 64, 0, 0, 0, units);
    CHECK_FALSE(p.status.ok);
    CHECK(p.status.message.find("has no GPU decoder") != std::string::npos);
    CHECK(units.empty());
  }
  h5::filter_step bs = step(k::bitshuffle, 4);
  bs.compression = codec::bitshuffle_mode::zstd;
  CHECK_FALSE(
      h5::plan_gpu_chunk(std::vector{bs}, 0, as_bytes(stored), 64, 0, 0, 0, units).status.ok);
  const std::vector<h5::filter_step> many(33, step(k::shuffle, 4));
  CHECK_FALSE(h5::plan_gpu_chunk(many, 0, as_bytes(stored), 64, 0, 0, 0, units).status.ok);
  // Declared sizes past what a unit holds, and offsets that would wrap, are refused up front.
  const std::vector<h5::filter_step> gz = {step(k::shuffle, 4), step(k::deflate)};
  CHECK_FALSE(h5::plan_gpu_chunk(gz, 0, as_bytes(stored), std::uint64_t{1} << 32, 0, 0, 0, units)
                  .status.ok);
  CHECK_FALSE(h5::plan_gpu_chunk(gz, 0, as_bytes(stored), 0, 0, 0, 0, units).status.ok);
  CHECK_FALSE(h5::plan_gpu_chunk(gz, 0, as_bytes(stored), 64, ~std::uint64_t{0} - 10, 0, 0, units)
                  .status.ok);
  CHECK_FALSE(h5::plan_gpu_chunk(gz, 0, as_bytes(stored), 64, 0, 0, ~std::uint64_t{0} - 10, units)
                  .status.ok);
  CHECK(units.empty());
  // A failure after some units were listed (an LZ4 chunk truncated after its first block) takes
  // them back; the units already in the list stay.
  std::mt19937_64 rng(35);
  const bytes data = make_bytes(pattern::runs, 10000, rng);
  bytes lz = lz4_filter_chunk(data, 4096);
  lz.resize(lz.size() - 10);
  units.resize(3);
  const h5::gpu_chunk_plan p =
      h5::plan_gpu_chunk(std::vector{step(k::lz4), step(k::fletcher32)}, 0, as_bytes(lz), 10000,
                         0, 0, 0, units);
  CHECK_FALSE(p.status.ok);
  CHECK(units.size() == 3);
}

TEST_CASE("a unit's status in the CPU path's words, and a chunk's first failing unit") {
  codec::gpu_unit check, inflate;
  check.kind = codec::gpu_unit_kind::fletcher32;
  inflate.kind = codec::gpu_unit_kind::deflate_fletcher32;
  inflate.dst_size = 100;
  codec::result r = cd::unit_failure(check, cd::unit_status::bad_fletcher32);
  CHECK(r.message == "fletcher32 checksum mismatch");
  CHECK(std::string(r.api) == "fletcher32");
  CHECK_FALSE(r.library_failed);
  r = cd::unit_failure(inflate, static_cast<cd::unit_status>(cd::inflate_status::short_output));
  CHECK(r.message == "the stream holds fewer than the expected 104 bytes");  // data + trailer
  CHECK(std::string(r.api) == "libdeflate_zlib_decompress");
  CHECK(cd::unit_failure(inflate, cd::unit_status::unsupported).library_failed);  // not the data
  const std::vector<codec::gpu_unit> units = {check, inflate};
  const std::vector<std::uint32_t> both_bad = {7, 17}, second_bad = {0, 17}, fine = {0, 0};
  CHECK(cd::chunk_failure(units, both_bad).api == std::string("fletcher32"));
  CHECK(cd::chunk_failure(units, second_bad).message.find("Adler-32") != std::string::npos);
  CHECK(cd::chunk_failure(units, fine).ok);
}

TEST_CASE("corrupt, truncated and mis-sized chunks fail as the CPU path fails, in its words") {
  std::mt19937_64 rng(36);
  int refused = 0, fletcher = 0, accepted = 0;
  for (int round = 0; round < 3000; ++round) {
    const layout l = all_layouts[rng() % 6];
    const std::size_t e = std::size_t{1} << (rng() % 4);
    const std::size_t n = 1 + rng() % 3000;
    const bytes data = make_bytes(all_patterns[rng() % 5], n, rng);
    filtered_chunk c = make_chunk(data, l, e, static_cast<int>(rng() % 10));
    std::size_t size = n;
    const auto how = rng() % 5;
    switch (how) {
      case 0:  // flip bits anywhere in the stored bytes
        for (int f = 1 + static_cast<int>(rng() % 3); f > 0; --f)
          c.stored[rng() % c.stored.size()] ^= static_cast<std::uint8_t>(1 << (rng() % 8));
        break;
      case 1:  // truncated, down to nothing
        c.stored.resize(rng() % c.stored.size());
        break;
      case 2:  // a declared chunk size that is off
        size = rng() % 2 ? n + 1 + rng() % 9 : n - std::min<std::size_t>(n - 1, 1 + rng() % 9);
        break;
      case 3: {  // the checksum inside the stream wrong (h5py 2's order): only fletcher32 sees it
        if (l != layout::fletcher_shuffle_deflate && l != layout::fletcher_deflate) break;
        bytes inner = with_fletcher32(data);
        inner[n + rng() % 4] ^= 1;
        c.stored =
            zlib_compress(l == layout::fletcher_deflate ? inner : shuffle_bytes(inner, e), 6);
        break;
      }
      default:
        break;
    }
    bytes cpu, gpu;
    const codec::result want = cpu_decode_chunk(c, 0, size, cpu);
    const codec::result got = gpu_decode_chunk(c, 0, size, gpu);
    INFO("round " << round << ": " << describe(l, e, n) << ", declared " << size << "; cpu: "
                  << want.api << ": " << want.message << "; gpu: " << got.api << ": "
                  << got.message);
    REQUIRE(got.ok == want.ok);
    if (want.ok) {
      CHECK(gpu == cpu);
      ++accepted;
      continue;
    }
    CHECK(std::string(got.api) == want.api);
    // A flipped bit or a cut can break a stream in several ways at once, and which one libdeflate
    // names depends on its own order of checks (it reads a cut stream on as zeros): there the api
    // (which step refused) must agree; for every other failure, mis-sized streams included, the
    // words too.
    if ((how != 0 && how != 1) || want.api != std::string("libdeflate_zlib_decompress"))
      CHECK(got.message == want.message);
    CHECK_FALSE(got.library_failed);
    ++refused;
    if (want.api == std::string("fletcher32")) ++fletcher;
  }
  CHECK(accepted > 300);
  CHECK(refused > 1500);
  CHECK(fletcher > 300);
}

TEST_CASE("random and corrupted units of the new kinds stay inside their own bytes") {
  // Each unit decoded alone with buffers of exactly its sizes: a read or write past any of them
  // is a sanitizer report. Element sizes, decoded sizes and streams disagree at random.
  std::mt19937_64 rng(37);
  cd::emulated_unit_warp warp;
  int refused = 0;
  for (int round = 0; round < 4000; ++round) {
    const std::size_t n = 1 + rng() % 3000;
    const bytes data = make_bytes(all_patterns[rng() % 5], n, rng);
    codec::gpu_unit u;
    u.kind = static_cast<codec::gpu_unit_kind>(5 + round % 4);
    const bool staged = u.kind == codec::gpu_unit_kind::deflate_unshuffle ||
                        u.kind == codec::gpu_unit_kind::deflate_fletcher32;
    bytes z = staged ? zlib_compress(round % 8 < 4 ? with_fletcher32(data) : data,
                                     static_cast<int>(rng() % 10))
              : u.kind == codec::gpu_unit_kind::fletcher32 ? with_fletcher32(data)
                                                           : data;
    if (rng() % 2) z[rng() % z.size()] ^= static_cast<std::uint8_t>(1 + rng() % 255);
    if (rng() % 3 == 0) z.resize(rng() % z.size());
    u.src_size = static_cast<std::uint32_t>(z.size());
    u.dst_size = u.kind == codec::gpu_unit_kind::fletcher32 ? 0
                 : u.kind == codec::gpu_unit_kind::unshuffle
                     ? u.src_size
                     : static_cast<std::uint32_t>(rng() % 2 ? n : rng() % (n + 16));
    u.element_size = static_cast<std::uint32_t>(rng() % 12);
    const auto in = std::make_unique<std::uint8_t[]>(z.size());
    std::copy(z.begin(), z.end(), in.get());
    const auto out = std::make_unique<std::uint8_t[]>(u.dst_size);
    const auto stage = std::make_unique<std::uint8_t[]>(codec::gpu_unit_stage_bytes(u));
    const auto tables = std::make_unique<std::uint8_t[]>(cd::unit_scratch_bytes(u) + 1);
    const cd::unit_status s =
        cd::decode_unit(in.get(), out.get(), stage.get(), u, tables.get(), warp);
    if (s != cd::unit_status::ok) ++refused;
    if (s == cd::unit_status::ok && u.kind == codec::gpu_unit_kind::unshuffle) {
      bytes cpu(u.dst_size);
      h5::unshuffle(reinterpret_cast<const std::byte*>(z.data()),
                    reinterpret_cast<std::byte*>(cpu.data()), cpu.size(), u.element_size);
      CHECK(std::equal(cpu.begin(), cpu.end(), out.get()));
    }
  }
  CHECK(refused > 1000);
}
