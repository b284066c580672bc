// The layout precheck: a chunked dataset whose layout message declares a
// chunk dimension of 0 made libhdf5 1.10.8 divide by zero (SIGFPE in H5D__chunk_set_info) inside
// H5Dopen2; gpufeed now refuses it with format_error naming file and dataset. Valid files with
// version 1 and version 2 object headers, chunked and contiguous, open unchanged, and the
// header walker's bounds (continuation loops, pointers past the end) are format_errors.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gpufeed/detail/hdf5/layout_precheck.hpp"
#include "gpufeed/detail/io/posix_file.hpp"
#include "gpufeed/hdf5_source.hpp"
#include "h5_writer.hpp"
#include "expect_error.hpp"
#include "test_util.hpp"

using namespace gpufeed;
using gpufeed::detail::io::posix_file;
using gpufeed::detail::hdf5::chunk_layout;
using gpufeed::test::dataset_spec;
using gpufeed::test::h5_file;
using gpufeed::test::h5_id;

namespace {
using gpufeed::test::has;

template <class F>
std::string format_error_of(F&& f) {
  return gpufeed::test::error_of<format_error>(std::forward<F>(f));
}

struct header_facts {
  std::optional<chunk_layout> layout;
  unsigned header_version = 0;
  std::uint64_t header_addr = 0;
};

// What the precheck reads for dataset `name` of `path`, and HDF5's own object header version.
header_facts inspect(const std::filesystem::path& path, const std::string& name) {
  h5_id fid(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose, "H5Fopen");
  H5O_info_t info{};
  gpufeed::test::h5_check(
      H5Oget_info_by_name2(fid, name.c_str(), &info, H5O_INFO_BASIC | H5O_INFO_HDR, H5P_DEFAULT), "H5Oget_info");
  posix_file f(path);
  return {gpufeed::detail::hdf5::read_chunk_layout(fid, f, name), info.hdr.version, info.addr};
}

void write_at(const std::filesystem::path& path, std::uint64_t at, const void* p, std::size_t n) {
  std::fstream io(path, std::ios::in | std::ios::out | std::ios::binary);
  io.seekp(static_cast<std::streamoff>(at));
  io.write(static_cast<const char*>(p), static_cast<std::streamsize>(n));
  REQUIRE(io.good());
}

// Bob Jenkins' lookup3 hashlittle, which HDF5 uses for metadata checksums (initval 0).
std::uint32_t lookup3(const std::uint8_t* k, std::size_t n) {
  auto rot = [](std::uint32_t x, int r) { return (x << r) | (x >> (32 - r)); };
  std::uint32_t a, b, c;
  a = b = c = 0xdeadbeefu + static_cast<std::uint32_t>(n);
  auto word = [&](std::size_t i, std::size_t left) {
    std::uint32_t w = 0;
    for (std::size_t j = 0; j < 4 && i + j < left; ++j) w |= std::uint32_t{k[i + j]} << (8 * j);
    return w;
  };
  while (n > 12) {
    a += word(0, 12), b += word(4, 12), c += word(8, 12);
    a -= c, a ^= rot(c, 4), c += b, b -= a, b ^= rot(a, 6), a += c, c -= b, c ^= rot(b, 8),
        b += a, a -= c, a ^= rot(c, 16), c += b, b -= a, b ^= rot(a, 19), a += c, c -= b,
        c ^= rot(b, 4), b += a;
    n -= 12, k += 12;
  }
  if (n == 0) return c;
  a += word(0, n), b += word(4, n), c += word(8, n);
  c ^= b, c -= rot(b, 14), a ^= c, a -= rot(c, 11), b ^= a, b -= rot(a, 25), c ^= b,
      c -= rot(b, 16), a ^= c, a -= rot(c, 4), b ^= a, b -= rot(a, 14), c ^= b, c -= rot(b, 24);
  return c;
}

std::vector<std::uint8_t> read_all(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Sets chunk dimension k of dataset `name` to 0 in the file's bytes; for a version 2 object
// header, recomputes chunk 0's checksum (checked against the stored one first), so that HDF5
// gets as far as the layout.
void zero_chunk_dim(const std::filesystem::path& path, const std::string& name, std::size_t k) {
  const auto facts = inspect(path, name);
  const auto& l = facts.layout;
  REQUIRE(l);
  REQUIRE(k < l->dims.size());
  const std::uint64_t zero = 0;
  write_at(path, l->dim_offsets[k], &zero, l->dim_bytes);
  if (facts.header_version != 2) return;
  auto bytes = read_all(path);
  const std::uint8_t* h = bytes.data() + facts.header_addr;
  REQUIRE(std::memcmp(h, "OHDR", 4) == 0);
  const unsigned size_bytes = 1u << (h[5] & 3u);
  const std::size_t fixed = 6 + ((h[5] & 0x20) ? 16 : 0) + ((h[5] & 0x10) ? 4 : 0);
  std::uint64_t chunk0 = 0;
  std::memcpy(&chunk0, h + fixed, size_bytes);
  const std::size_t covered = fixed + size_bytes + chunk0;
  REQUIRE(l->dim_offsets[k] < facts.header_addr + covered);  // the layout is in chunk 0
  std::uint32_t stored = 0;
  std::memcpy(&stored, h + covered, 4);
  std::memcpy(&bytes[l->dim_offsets[k]], &l->dims[k], l->dim_bytes);  // the bytes before
  REQUIRE(lookup3(h, covered) == stored);  // the checksum is understood
  std::memset(&bytes[l->dim_offsets[k]], 0, l->dim_bytes);
  const std::uint32_t sum = lookup3(h, covered);
  write_at(path, facts.header_addr + covered, &sum, 4);
}

// Sets the dimensionality byte of dataset `name`'s layout message to `ndims`; for a version 2
// object header, recomputes chunk 0's checksum so that HDF5 gets as far as the layout.
void set_layout_ndims(const std::filesystem::path& path, const std::string& name,
                      std::uint8_t ndims) {
  const auto facts = inspect(path, name);
  REQUIRE(facts.layout);
  write_at(path, facts.layout->ndims_offset, &ndims, 1);
  if (facts.header_version != 2) return;
  auto bytes = read_all(path);
  const std::uint8_t* h = bytes.data() + facts.header_addr;
  REQUIRE(std::memcmp(h, "OHDR", 4) == 0);
  const unsigned size_bytes = 1u << (h[5] & 3u);
  const std::size_t fixed = 6 + ((h[5] & 0x20) ? 16 : 0) + ((h[5] & 0x10) ? 4 : 0);
  std::uint64_t chunk0 = 0;
  std::memcpy(&chunk0, h + fixed, size_bytes);
  const std::size_t covered = fixed + size_bytes + chunk0;
  REQUIRE(facts.layout->ndims_offset < facts.header_addr + covered);
  const std::uint32_t sum = lookup3(h, covered);
  write_at(path, facts.header_addr + covered, &sum, 4);
}

// Rewrites the version 3 layout message of 1-D chunked dataset `name` (v1 object header) as a
// version 2 message of the same size whose chunk dimension 0 is 0. libhdf5 1.10.8 checks chunk
// dimensions when it decodes layout versions 3 and 4, not 1 and 2: this file made H5Dopen2
// divide by zero (SIGFPE in H5D__chunk_set_info).
void zero_chunk_dim_layout_v2(const std::filesystem::path& path, const std::string& name) {
  const auto facts = inspect(path, name);
  REQUIRE(facts.header_version == 1);
  REQUIRE(facts.layout);
  REQUIRE(facts.layout->dims.size() == 2);  // rank 1 + the element size
  const std::uint64_t msg = facts.layout->dim_offsets[0] - 11;  // version, class, ndims, address
  auto bytes = read_all(path);
  REQUIRE(bytes[msg] == 3);
  std::uint16_t size = 0;
  std::memcpy(&size, &bytes[msg - 6], 2);  // the v1 message header's size field
  REQUIRE(size >= 24);                      // 8 + address (8) + 2 dims (4 each)
  std::uint8_t v2[24] = {2, 2, 2};          // version 2, 2 dims, chunked, 5 reserved
  std::memcpy(v2 + 8, &bytes[msg + 3], 8);  // the chunk index address
  const std::uint32_t dims[2] = {0, static_cast<std::uint32_t>(facts.layout->dims[1])};
  std::memcpy(v2 + 16, dims, 8);
  write_at(path, msg, v2, sizeof v2);
}

void write_chunked(const std::filesystem::path& path, bool latest) {
  h5_file f(path, latest);
  dataset_spec d;
  d.dims = {64, 16};
  d.chunk = {8, 16};
  f.add(d, gpufeed::test::pattern<std::uint8_t>(64 * 16));
}
}  // namespace

TEST_CASE("valid chunked and contiguous files, v1 and v2 object headers: read and open unchanged") {
  gpufeed::test::temp_dir dir("h5lay");
  for (bool latest : {false, true}) {
    CAPTURE(latest);
    const auto chunked = dir / "c.h5";
    write_chunked(chunked, latest);
    const auto c = inspect(chunked, "data");
    CHECK(c.header_version == (latest ? 2u : 1u));
    REQUIRE(c.layout);
    CHECK(c.layout->dims == std::vector<std::uint64_t>{8, 16, 1});  // last: the element size
    hdf5_source src(chunked);
    CHECK(src.size() == 64);

    const auto contiguous = dir / "p.h5";
    {
      h5_file f(contiguous, latest);
      dataset_spec d;
      d.dims = {10, 4};
      f.add(d, gpufeed::test::pattern<std::uint8_t>(40));
    }
    CHECK_FALSE(inspect(contiguous, "data").layout);
    CHECK(hdf5_source(contiguous).size() == 10);
  }
}

TEST_CASE("a dataset behind an external link: its header is in the other file, not parsed") {
  gpufeed::test::temp_dir dir("h5ext");
  const auto target = dir / "target.h5";
  write_chunked(target, false);
  const auto linker = dir / "link.h5";
  {
    h5_file f(linker, true);
    gpufeed::test::h5_check(H5Lcreate_external(target.c_str(), "/data", f.id(), "data",
                                               H5P_DEFAULT, H5P_DEFAULT),
                            "H5Lcreate_external");
  }
  // The address H5Oget_info gives is in target.h5: the precheck must not read link.h5 there.
  h5_id fid(H5Fopen(linker.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose, "H5Fopen");
  CHECK_FALSE(gpufeed::detail::hdf5::read_chunk_layout(fid, posix_file(linker), "data"));
}

TEST_CASE("a zero chunk dimension in a version 2 layout message: format_error (was SIGFPE)") {
  gpufeed::test::temp_dir dir("h5zero2");
  const auto path = dir / "z.h5";
  {
    h5_file f(path);
    dataset_spec d;
    d.dims = {64};
    d.chunk = {8};
    f.add(d, gpufeed::test::pattern<std::uint8_t>(64));
  }
  CHECK(hdf5_source(path).size() == 64);  // valid before the patch
  zero_chunk_dim_layout_v2(path, "data");
  // H5Oget_info (the precheck's first step) does not decode the layout: it must not crash.
  CHECK(inspect(path, "data").layout->dims == std::vector<std::uint64_t>{0, 1});
  const std::string what = format_error_of([&] { hdf5_source src(path); });
  CHECK(has(what, path.string()));
  CHECK(has(what, "dataset 'data'"));
  CHECK(has(what, "chunk dimension 0 is 0"));
}

TEST_CASE("a zero chunk dimension in layout messages 3 and 4, element size included") {
  // libhdf5 refuses most of these itself ("dataset not found"), but opens a version 4 message
  // whose element-size dimension is 0; gpufeed names the fault for every one.
  gpufeed::test::temp_dir dir("h5zero");
  for (bool latest : {false, true})
    for (std::size_t k : {0, 1, 2}) {
      CAPTURE(latest);
      CAPTURE(k);
      const auto path = dir / "z.h5";
      // v1 header and layout message version 3, or v2 header (checksummed) and layout version 4
      write_chunked(path, latest);
      zero_chunk_dim(path, "data", k);
      const std::string what = format_error_of([&] { hdf5_source src(path); });
      CHECK(has(what, path.string()));
      CHECK(has(what, "dataset 'data'"));
      CHECK(has(what, "chunk dimension " + std::to_string(k) + " is 0"));
    }
}

TEST_CASE("a zero chunk dimension in blob offsets or labels: format_error naming that dataset") {
  gpufeed::test::temp_dir dir("h5zerob");
  for (const std::string target : {"offsets", "labels"}) {
    CAPTURE(target);
    const auto path = dir / "b.h5";
    {
      h5_file f(path);
      dataset_spec d;
      d.dims = {40};
      d.chunk = {8};
      f.add(d, gpufeed::test::pattern<std::uint8_t>(40));
      dataset_spec o = gpufeed::test::offsets_spec(5);
      o.chunk = {5};
      f.add(o, std::vector<std::uint64_t>{0, 10, 20, 30, 40});
      dataset_spec l = o;
      l.name = "labels";
      l.file_type = H5T_STD_I64LE;
      l.mem_type = H5T_NATIVE_INT64;
      l.dims = {4};
      l.chunk = {4};
      f.add(l, std::vector<std::int64_t>{1, 2, 3, 4});
    }
    hdf5_options opt;
    opt.label_dataset = "labels";
    CHECK(hdf5_source(path, opt).size() == 4);  // valid before the patch
    zero_chunk_dim_layout_v2(path, target);
    const std::string what = format_error_of([&] { hdf5_source src(path, opt); });
    CHECK(has(what, path.string()));
    CHECK(has(what, "dataset '" + target + "'"));
    CHECK(has(what, "chunk dimension 0 is 0"));
  }
}

namespace {
// A hand-made version 1 object header at byte 0: one continuation message pointing to `cont`
// (relative address, 16-byte block), and at `cont` a block holding `block` (8-byte message
// headers already included).
std::filesystem::path v1_header_with_continuation(const gpufeed::test::temp_dir& dir,
                                                  std::uint64_t cont_addr, std::uint64_t cont_len,
                                                  const std::vector<std::uint8_t>& block) {
  std::vector<std::uint8_t> b(64, 0);
  b[0] = 1;      // version
  b[2] = 1;      // one message
  b[8] = 24;     // header data size: one 8-byte message header + 16 bytes
  b[16] = 0x10;  // type: continuation
  b[18] = 16;    // size
  std::memcpy(&b[24], &cont_addr, 8);
  std::memcpy(&b[32], &cont_len, 8);
  b.insert(b.end(), block.begin(), block.end());
  const auto path = dir / "hand.bin";
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
  return path;
}

std::optional<chunk_layout> walk(const std::filesystem::path& path) {
  posix_file f(path);
  return gpufeed::detail::hdf5::layout_reader(f, 0, 8, 8, "data").read(0);
}
}  // namespace

TEST_CASE("header walker: follows a continuation, refuses a loop and a block past the file") {
  gpufeed::test::temp_dir dir("h5walk");
  // A v3 chunked layout message reached through the continuation: dims {4, 0, 1}.
  std::vector<std::uint8_t> layout_block(8 + 24, 0);
  layout_block[0] = 0x08;                            // type: data layout
  layout_block[2] = 24;                              // size
  std::vector<std::uint8_t> msg = {3, 2, 3};         // version 3, chunked, 3 dims
  msg.resize(3 + 8, 0xff);                           // index address: undefined
  for (std::uint32_t v : {4u, 0u, 1u})
    for (int i = 0; i < 4; ++i) msg.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
  std::memcpy(&layout_block[8], msg.data(), msg.size());
  const auto ok = walk(v1_header_with_continuation(dir, 64, layout_block.size(), layout_block));
  REQUIRE(ok);
  CHECK(ok->dims == std::vector<std::uint64_t>{4, 0, 1});
  CHECK(ok->dim_offsets[1] == 64 + 8 + 11 + 4);

  // The continuation block holds a continuation back to itself.
  std::vector<std::uint8_t> loop(24, 0);
  loop[0] = 0x10;
  loop[2] = 16;
  const std::uint64_t self = 64, len = 24;
  std::memcpy(&loop[8], &self, 8);
  std::memcpy(&loop[16], &len, 8);
  CHECK(has(format_error_of([&] { walk(v1_header_with_continuation(dir, 64, 24, loop)); }),
            "continuation loop"));
  CHECK(has(format_error_of([&] { walk(v1_header_with_continuation(dir, 1 << 20, 24, loop)); }),
            "past the end of the file"));
}

TEST_CASE("a chunked layout message of dimensionality 0 or 1: format_error (was SIGFPE)") {
  // A clean 1-D chunked file with the layout message's dimensionality byte patched to 0 made
  // libhdf5 1.10.8 divide by zero in H5D__chunk_set_info inside H5Dopen2.
  gpufeed::test::temp_dir dir("h5rank0");
  for (bool latest : {false, true})
    for (std::uint8_t ndims : {std::uint8_t{0}, std::uint8_t{1}}) {
      CAPTURE(latest);
      CAPTURE(int{ndims});
      const auto path = dir / "r.h5";
      {
        h5_file f(path, latest);
        dataset_spec d;
        d.dims = {64};
        d.chunk = {8};
        f.add(d, gpufeed::test::pattern<std::uint8_t>(64));
      }
      CHECK(hdf5_source(path).size() == 64);  // valid before the patch
      set_layout_ndims(path, "data", ndims);
      CHECK(inspect(path, "data").layout->dims.size() == ndims);
      const std::string what = format_error_of([&] { hdf5_source src(path); });
      CHECK(has(what, path.string()));
      CHECK(has(what, "dataset 'data'"));
      CHECK(has(what, "declares " + std::to_string(ndims) + " dimensions"));
    }
}
