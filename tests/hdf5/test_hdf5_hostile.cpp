// Crafted and damaged shards: declared sizes far past what the file can
// hold, a chunk index entry pointing past the end of the file, a dataset with no records. Each is
// a typed gpufeed error naming the file (and dataset) at open — no std::bad_alloc, no fallback
// that fails every record later.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "gpufeed/hdf5_source.hpp"
#include "gpufeed/loader.hpp"
#include "h5_writer.hpp"
#include "expect_error.hpp"
#include "test_util.hpp"

using namespace gpufeed;
using gpufeed::test::dataset_spec;
using gpufeed::test::h5_file;

namespace {
template <class F>
std::string format_error_of(F&& f) {
  return gpufeed::test::error_of<format_error>(std::forward<F>(f));
}

using gpufeed::test::has;
}  // namespace

TEST_CASE("blob offsets declaring 2^40 entries: format_error naming file and dataset") {
  gpufeed::test::temp_dir dir("h5huge");
  const auto path = dir / "b.h5";
  {
    h5_file f(path);
    dataset_spec d;
    d.dims = {100};
    f.add(d, std::vector<std::uint8_t>(100, 7));
    dataset_spec o = gpufeed::test::offsets_spec(hsize_t{1} << 40);
    o.chunk = {1024};
    o.write = false;  // declared only: nothing stored
    f.add_raw(o, nullptr);
  }
  const std::string what = format_error_of([&] { hdf5_source src(path); });
  CHECK(has(what, path.string()));
  CHECK(has(what, "'offsets'"));
  CHECK(has(what, "more than a file of"));
}

TEST_CASE("a label dataset declaring 2^40 entries: format_error naming file and dataset") {
  gpufeed::test::temp_dir dir("h5hugel");
  const auto path = dir / "l.h5";
  {
    h5_file f(path);
    dataset_spec d;
    d.dims = {hsize_t{1} << 40};
    d.chunk = {1024};
    d.write = false;
    f.add_raw(d, nullptr);
    dataset_spec l = d;
    l.name = "labels";
    l.file_type = H5T_STD_I64LE;
    f.add_raw(l, nullptr);
  }
  hdf5_options o;
  o.label_dataset = "labels";
  const std::string what = format_error_of([&] { hdf5_source src(path, o); });
  CHECK(has(what, path.string()));
  CHECK(has(what, "'labels'"));
}

TEST_CASE("shape (4, 2^40) float64: format_error from the source, not bad_alloc from a loader") {
  gpufeed::test::temp_dir dir("h5hugef");
  const auto path = dir / "f.h5";
  {
    h5_file f(path);
    dataset_spec d;
    d.file_type = H5T_IEEE_F64LE;
    d.mem_type = H5T_NATIVE_DOUBLE;
    d.dims = {4, hsize_t{1} << 40};
    d.chunk = {1, 1 << 16};
    d.write = false;
    f.add_raw(d, nullptr);
  }
  const std::string what = format_error_of([&] {
    hdf5_source src(path);
    loader_config c;
    c.batch_size = 2;
    c.part = partition{};
    loader<hdf5_source> l(src, c);
  });
  CHECK(has(what, path.string()));
  CHECK(has(what, "'data' declares a record"));
}

TEST_CASE("a v1 B-tree chunk address past the end of the file: format_error at open") {
  gpufeed::test::temp_dir dir("h5btree");
  const auto path = dir / "c.h5";
  {
    h5_file f(path);  // default format: v1 B-tree chunk index
    dataset_spec d;
    d.dims = {64, 16};
    d.chunk = {8, 16};
    f.add(d, gpufeed::test::pattern<std::uint8_t>(64 * 16));
  }
  const auto [addr, size] = gpufeed::test::chunk_extent(path, "data", {24, 0});
  std::vector<char> bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  std::size_t hits = 0;  // the B-tree node's child pointer to that chunk
  for (std::size_t at = 0; at + 8 <= bytes.size(); ++at) {
    std::uint64_t v = 0;
    std::memcpy(&v, bytes.data() + at, 8);
    if (v != addr) continue;
    const std::uint64_t past = std::uint64_t{1} << 40;
    std::memcpy(bytes.data() + at, &past, 8);
    ++hits;
  }
  REQUIRE(hits == 1);
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  const std::string what = format_error_of([&] { hdf5_source src(path); });
  CHECK(has(what, path.string()));
  CHECK(has(what, "chunk at (24, 0)"));
}

TEST_CASE("a dataset with no records: config_error naming the file") {
  gpufeed::test::temp_dir dir("h5empty");
  const auto path = dir / "e.h5";
  {
    h5_file f(path);
    dataset_spec d;
    d.dims = {0, 16};
    f.add(d, std::vector<std::uint8_t>{});
  }
  try {
    hdf5_source src(path);
    FAIL("no exception thrown");
  } catch (const config_error& e) {
    CHECK(e.file() == path.string());
    CHECK(has(e.what(), "no records"));
  }
}

TEST_CASE("a decoded chunk larger than an explicit decode-cache budget: config_error naming it") {
  // Such chunks were decoded into each reader's own buffer, one copy per worker.
  gpufeed::test::temp_dir dir("h5budget");
  const auto path = dir / "c.h5";
  {
    h5_file f(path);
    dataset_spec d;
    d.dims = {64, 256};
    d.chunk = {16, 256};  // 4 KiB chunks of 16 rows
    d.deflate = 1;
    f.add(d, gpufeed::test::pattern<std::uint8_t>(64 * 256));
  }
  hdf5_options o;
  o.decode_cache_bytes = 1024;
  hdf5_source src(path, o);
  std::vector<std::byte> row(256);
  const std::string e = gpufeed::test::error_of<config_error>([&] { src.read(17, row); });
  CHECK(has(e, path.string()));
  CHECK(has(e, "record 17"));
  CHECK(has(e, "decode_cache_bytes"));
  o.decode_cache_bytes = 4096;  // one chunk: read
  hdf5_source fits(path, o);
  fits.read(17, row);
  CHECK(std::memcmp(row.data(), gpufeed::test::pattern<std::uint8_t>(64 * 256).data() + 17 * 256,
                    256) == 0);
}
