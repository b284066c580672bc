// Unit tests of the pieces under detail/hdf5: offsets validation, filters, record geometry.
#include <doctest/doctest.h>
#include <zlib.h>

#include <cstdint>
#include <cstring>
#include <numeric>
#include <vector>

#include "gpufeed/detail/hdf5/blob_index.hpp"
#include "gpufeed/detail/codec/deflate.hpp"
#include "gpufeed/detail/hdf5/filters.hpp"
#include "gpufeed/detail/hdf5/geometry.hpp"

using namespace gpufeed::detail::hdf5;

TEST_CASE("validate_blob_offsets") {
  using v = std::vector<std::uint64_t>;
  CHECK_FALSE(validate_blob_offsets(v{0}, 0));        // zero records
  CHECK_FALSE(validate_blob_offsets(v{0, 0, 0}, 0));  // empty records
  CHECK_FALSE(validate_blob_offsets(v{0, 5, 5, 9}, 9));
  auto p = validate_blob_offsets(v{0, 5, 4, 9}, 9);
  REQUIRE(p);
  CHECK(p->entry == 2);
  CHECK(p->record == 1);
  p = validate_blob_offsets(v{0, 5, 10}, 9);
  REQUIRE(p);
  CHECK(p->entry == 2);
  p = validate_blob_offsets(v{0, 5}, 9);
  REQUIRE(p);
  CHECK_FALSE(p->record);
  CHECK(validate_blob_offsets(v{}, 0));
  CHECK(validate_blob_offsets(v{1, 9}, 9));
  CHECK(validate_blob_offsets(v{0, UINT64_MAX}, UINT64_MAX - 1));
}

TEST_CASE("unshuffle undoes HDF5's byte-plane shuffle, leftover bytes included") {
  // sizes around the 16-element steps of the SSE2 paths (2, 4, 8) and the generic one (3, 16)
  for (std::size_t elem : {1u, 2u, 4u, 8u, 3u, 16u}) {
    for (std::size_t n : {0u, 1u, 5u, 8u, 17u, 64u, 67u, 255u, 256u, 1000u, 4099u, 131077u}) {
      CAPTURE(elem);
      CAPTURE(n);
      std::vector<std::byte> plain(n), shuffled(n), back(n);
      for (std::size_t k = 0; k < n; ++k) plain[k] = static_cast<std::byte>(k * 7 + 1);
      const std::size_t count = n / elem;
      if (elem > 1 && count > 1) {  // shuffle as H5Zshuffle.c does
        for (std::size_t b = 0; b < elem; ++b)
          for (std::size_t i = 0; i < count; ++i) shuffled[b * count + i] = plain[i * elem + b];
        std::memcpy(shuffled.data() + count * elem, plain.data() + count * elem, n - count * elem);
      } else {
        shuffled = plain;
      }
      unshuffle(shuffled.data(), back.data(), n, elem);
      CHECK(back == plain);
    }
  }
}

TEST_CASE("fletcher32: HDF5's algorithm, little-endian trailer, legacy byte-swapped form") {
  std::vector<std::byte> d(11);
  for (std::size_t k = 0; k < d.size(); ++k) d[k] = static_cast<std::byte>(k + 1);
  // Hand computation for words 0x0102 0x0304 0x0506 0x0708 0x090a, odd byte 0x0b00.
  std::uint32_t s1 = 0, s2 = 0;
  for (std::uint32_t w : {0x0102u, 0x0304u, 0x0506u, 0x0708u, 0x090au, 0x0b00u}) {
    s1 += w;
    s2 += s1;
  }
  s1 = (s1 & 0xffff) + (s1 >> 16);
  s2 = (s2 & 0xffff) + (s2 >> 16);
  const std::uint32_t sum = (s2 << 16) | s1;
  CHECK(fletcher32(d.data(), d.size()) == sum);
  auto with = [&](std::uint32_t c) {
    auto v = d;
    for (int b = 0; b < 4; ++b) v.push_back(static_cast<std::byte>(c >> (8 * b)));
    return v;
  };
  auto ok = with(sum);
  CHECK(fletcher32_matches(ok.data(), ok.size()));
  auto legacy = with(((sum & 0x00ff00ffu) << 8) | ((sum >> 8) & 0x00ff00ffu));
  CHECK(fletcher32_matches(legacy.data(), legacy.size()));
  auto bad = with(sum ^ 1);
  CHECK_FALSE(fletcher32_matches(bad.data(), bad.size()));
  CHECK_FALSE(fletcher32_matches(d.data(), 3));
}

TEST_CASE("deflate decoder (libdeflate): exact size only, Adler-32 verified") {
  std::vector<std::byte> plain(5000);
  for (std::size_t k = 0; k < plain.size(); ++k) plain[k] = static_cast<std::byte>(k % 13);
  std::vector<std::byte> z(compressBound(plain.size()));
  uLongf zn = z.size();
  REQUIRE(compress2(reinterpret_cast<Bytef*>(z.data()), &zn,
                    reinterpret_cast<const Bytef*>(plain.data()), plain.size(), 6) == Z_OK);
  z.resize(zn);
  gpufeed::detail::codec::deflate_decoder inf;
  std::vector<std::byte> out(plain.size());
  for (int round = 0; round < 2; ++round) {  // reuse after success
    CHECK(inf.decode(z, out).ok);
    CHECK(out == plain);
  }
  std::vector<std::byte> small(plain.size() - 1), big(plain.size() + 1);
  CHECK_FALSE(inf.decode(z, small).ok);
  CHECK_FALSE(inf.decode(z, big).ok);
  CHECK_FALSE(inf.decode(std::span(z).first(z.size() / 2), out).ok);
  auto broken = z;
  broken[broken.size() - 2] ^= std::byte{1};  // Adler-32 trailer
  const auto r = inf.decode(broken, out);
  CHECK_FALSE(r.ok);
  CHECK_FALSE(r.library_failed);
  auto trailing = z;  // bytes after the stream's end are ignored, as HDF5 ignores them
  trailing.push_back(std::byte{7});
  CHECK(inf.decode(trailing, out).ok);
  CHECK(inf.decode(z, out).ok);  // reuse after failure
}

TEST_CASE("byteswap_elements") {
  std::vector<std::byte> v{std::byte{1}, std::byte{2}, std::byte{3}, std::byte{4}};
  byteswap_elements(v.data(), 4, 2);
  CHECK(v == std::vector<std::byte>{std::byte{2}, std::byte{1}, std::byte{4}, std::byte{3}});
  byteswap_elements(v.data(), 4, 4);
  CHECK(v == std::vector<std::byte>{std::byte{3}, std::byte{4}, std::byte{1}, std::byte{2}});
}

TEST_CASE("chunk_part: runs through a 3-D chunk grid cover every record byte once") {
  chunk_grid g;
  g.rank = 3;
  g.element_size = 2;
  g.dims[0] = 10, g.dims[1] = 5, g.dims[2] = 7;
  g.chunk[0] = 3, g.chunk[1] = 2, g.chunk[2] = 4;
  g.finish();
  CHECK(g.grid[0] == 4);
  CHECK(g.grid[1] == 3);
  CHECK(g.grid[2] == 2);
  CHECK(g.chunk_bytes == 48);
  for (std::uint64_t row = 0; row < 10; ++row) {
    record_box b;
    b.start[0] = row;
    b.count[0] = 1;
    b.count[1] = 5;
    b.count[2] = 7;
    std::vector<int> hits(70, 0);
    int chunks = 0;
    for_each_chunk(g, b, [&](std::uint64_t k, const coords& pos) {
      ++chunks;
      CHECK(k == g.linear(pos));
      chunk_part part(g, b, pos);
      part.for_each_run([&](std::size_t src, std::size_t dst, std::size_t len) {
        CHECK(src + len <= g.chunk_bytes);
        for (std::size_t x = dst; x < dst + len; ++x) ++hits[x];
      });
    });
    CHECK(chunks == 6);
    CHECK(std::all_of(hits.begin(), hits.end(), [](int h) { return h == 1; }));
  }
  // A chunk holding whole rows: one run per record.
  chunk_grid r;
  r.rank = 2;
  r.element_size = 4;
  r.dims[0] = 9, r.dims[1] = 6;
  r.chunk[0] = 4, r.chunk[1] = 6;
  r.finish();
  record_box b;
  b.start[0] = 5;
  b.count[0] = 1;
  b.count[1] = 6;
  coords pos{};
  pos[0] = 1;
  chunk_part part(r, b, pos);
  CHECK(part.runs() == 1);
  int calls = 0;
  part.for_each_run([&](std::size_t src, std::size_t dst, std::size_t bytes) {
    ++calls;
    CHECK(src == 24);
    CHECK(dst == 0);
    CHECK(bytes == 24);
  });
  CHECK(calls == 1);
}
