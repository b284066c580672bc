// hdf5_source on files written by the HDF5 C API: layouts, chunk shapes, filters, dtypes,
// several shards, labels, and what shards() reports.
#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "gpufeed/hdf5_source.hpp"
#include "gpufeed/source.hpp"
#include "h5_writer.hpp"
#include "hdf5_test_util.hpp"
#include "test_util.hpp"

using namespace gpufeed;
using gpufeed::test::dataset_spec;
using gpufeed::test::h5_file;
using gpufeed::test::pattern;
using gpufeed::test::rows_of;

static_assert(source<hdf5_source>);
static_assert(labeled_source<hdf5_source>);
static_assert(fixed_size_aware_source<hdf5_source>);
static_assert(reader_source<hdf5_source>);
static_assert(!std::is_copy_constructible_v<hdf5_source>);
static_assert(std::is_nothrow_move_constructible_v<hdf5_source>);

namespace {

struct filter_set {
  const char* name;
  bool fletcher_first, shuffle;
  int deflate;
  bool fletcher;
  std::vector<std::string> reported;
};

std::vector<filter_set> filter_sets() {
  return {
      {"none", false, false, -1, false, {}},
      {"deflate", false, false, 6, false, {"deflate(6)"}},
      {"shuffle+deflate", false, true, 4, false, {"shuffle", "deflate(4)"}},
      {"fletcher32", false, false, -1, true, {"fletcher32"}},
      {"shuffle+deflate+fletcher32", false, true, 1, true, {"shuffle", "deflate(1)", "fletcher32"}},
      {"fletcher32 before deflate", true, true, 9, false, {"fletcher32", "shuffle", "deflate(9)"}},
  };
}

}  // namespace

TEST_CASE("contiguous fixed dataset: pread_raw, every dtype") {
  gpufeed::test::temp_dir dir("h5c");
  auto run = [&](auto tag, hid_t ftype, hid_t mtype, const char* dtype) {
    using T = decltype(tag);
    CAPTURE(dtype);
    const auto v = pattern<T>(23 * 3 * 4);
    const auto path = dir / (std::string(dtype) + ".h5");
    {
      h5_file f(path);
      dataset_spec s;
      s.file_type = ftype;
      s.mem_type = mtype;
      s.dims = {23, 3, 4};
      f.add(s, v);
    }
    hdf5_source src(path);
    CHECK(src.size() == 23);
    CHECK(src.fixed_record_size() == 12 * sizeof(T));
    CHECK(src.max_record_size() == 12 * sizeof(T));
    CHECK_FALSE(src.has_labels());
    CHECK_FALSE(src.uses_fallback());
    const auto& info = src.shards().at(0);
    CHECK(info.path == path);
    CHECK(info.layout == "fixed");
    CHECK(info.dtype == dtype);
    CHECK(info.shape == std::vector<std::uint64_t>{23, 3, 4});
    CHECK(info.storage == "contiguous");
    CHECK(info.chunk_shape.empty());
    CHECK(info.filters.empty());
    CHECK(info.data_bytes == v.size() * sizeof(T));
    const bool swapped = std::string(dtype).find("big-endian") != std::string::npos;
    CHECK(info.read_path == (swapped ? hdf5_read_path::pread_decode : hdf5_read_path::pread_raw));
    CHECK(info.fallback_reason.empty());
    CHECK(gpufeed::test::count_mismatches(src, rows_of(v, 12)) == 0);
  };
  run(std::uint8_t{}, H5T_STD_U8LE, H5T_NATIVE_UINT8, "uint8");
  run(std::int8_t{}, H5T_STD_I8LE, H5T_NATIVE_INT8, "int8");
  run(std::int16_t{}, H5T_STD_I16LE, H5T_NATIVE_INT16, "int16");
  run(std::uint32_t{}, H5T_STD_U32LE, H5T_NATIVE_UINT32, "uint32");
  run(std::int64_t{}, H5T_STD_I64LE, H5T_NATIVE_INT64, "int64");
  run(float{}, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, "float32");
  run(double{}, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, "float64");
  run(std::int32_t{}, H5T_STD_I32BE, H5T_NATIVE_INT32, "int32 big-endian");
  run(double{}, H5T_IEEE_F64BE, H5T_NATIVE_DOUBLE, "float64 big-endian");
  run(std::uint16_t{}, H5T_STD_U16BE, H5T_NATIVE_UINT16, "uint16 big-endian");
}

TEST_CASE("chunked fixed dataset: chunk shapes x filters") {
  gpufeed::test::temp_dir dir("h5k");
  const std::vector<std::uint64_t> dims = {37, 5, 6};
  const std::vector<std::vector<hsize_t>> chunks = {
      {1, 5, 6},   // one chunk = one record: decoded straight into the record
      {4, 5, 6},   // several rows per chunk, a partial edge chunk
      {3, 2, 4},   // chunks split rows along dims 1 and 2, edge chunks everywhere
      {7, 5, 1},   // runs of one element
      {50, 8, 9},  // one chunk larger than the whole dataset
      {2, 5, 4},   // rows split along the last dimension only
  };
  const auto v = pattern<std::int16_t>(37 * 5 * 6, 3);
  int n = 0;
  for (const auto& chunk : chunks) {
    for (const auto& fs : filter_sets()) {
      CAPTURE(fs.name);
      CAPTURE(chunk[0]);
      CAPTURE(chunk[1]);
      CAPTURE(chunk[2]);
      const auto path = dir / ("k" + std::to_string(n++) + ".h5");
      {
        h5_file f(path);
        dataset_spec s;
        s.file_type = H5T_STD_I16LE;
        s.mem_type = H5T_NATIVE_INT16;
        s.dims = {37, 5, 6};
        s.chunk = chunk;
        s.unlimited = chunk[0] > 37;
        s.fletcher32_first = fs.fletcher_first;
        s.shuffle = fs.shuffle;
        s.deflate = fs.deflate;
        s.fletcher32 = fs.fletcher;
        f.add(s, v);
      }
      hdf5_source src(path);
      const auto& info = src.shards().at(0);
      CHECK(info.storage == "chunked");
      CHECK(info.chunk_shape == std::vector<std::uint64_t>(chunk.begin(), chunk.end()));
      CHECK(info.filters == fs.reported);
      CHECK(info.read_path ==
            (fs.reported.empty() ? hdf5_read_path::pread_raw : hdf5_read_path::pread_decode));
      CHECK(info.shape == dims);
      CHECK(src.fixed_record_size() == 60);
      CHECK(gpufeed::test::count_mismatches(src, rows_of(v, 30)) == 0);
    }
  }
}

TEST_CASE("chunked dtypes: uint8, float32, float64 and big-endian with shuffle+deflate") {
  gpufeed::test::temp_dir dir("h5d");
  auto run = [&](auto tag, hid_t ftype, hid_t mtype, const char* dtype) {
    using T = decltype(tag);
    CAPTURE(dtype);
    const auto v = pattern<T>(41 * 17, 5);
    const auto path = dir / (std::string(dtype) + ".h5");
    {
      h5_file f(path);
      dataset_spec s;
      s.file_type = ftype;
      s.mem_type = mtype;
      s.dims = {41, 17};
      s.chunk = {6, 5};
      s.shuffle = true;
      s.deflate = 5;
      s.fletcher32 = true;
      f.add(s, v);
    }
    hdf5_source src(path);
    CHECK(src.shards()[0].dtype == dtype);
    CHECK(src.shards()[0].read_path == hdf5_read_path::pread_decode);
    CHECK(gpufeed::test::count_mismatches(src, rows_of(v, 17)) == 0);
  };
  run(std::uint8_t{}, H5T_STD_U8LE, H5T_NATIVE_UINT8, "uint8");
  run(float{}, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, "float32");
  run(double{}, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, "float64");
  run(std::int64_t{}, H5T_STD_I64BE, H5T_NATIVE_INT64, "int64 big-endian");
  run(float{}, H5T_IEEE_F32BE, H5T_NATIVE_FLOAT, "float32 big-endian");
}

TEST_CASE("1-D fixed dataset: one element per record") {
  gpufeed::test::temp_dir dir("h51");
  const auto v = pattern<double>(1000, 9);
  const auto path = dir / "d.h5";
  {
    h5_file f(path);
    dataset_spec s;
    s.file_type = H5T_IEEE_F64LE;
    s.mem_type = H5T_NATIVE_DOUBLE;
    s.dims = {1000};
    s.chunk = {64};
    s.deflate = 3;
    f.add(s, v);
  }
  hdf5_source src(path);
  CHECK(src.fixed_record_size() == 8);
  CHECK(gpufeed::test::count_mismatches(src, rows_of(v, 1)) == 0);
}

namespace {
// Blob records of varied sizes (0 .. 300 bytes), their concatenation and offsets.
struct blob_data {
  std::vector<std::vector<std::byte>> records;
  std::vector<std::uint8_t> data;
  std::vector<std::uint64_t> offsets{0};
};
blob_data make_blob(std::size_t n, unsigned seed) {
  blob_data b;
  const auto sizes = pattern<std::uint32_t>(n, seed);
  const auto bytes = pattern<std::uint8_t>(n * 301, seed + 1);
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t len = (i % 11 == 0) ? 0 : sizes[i] % 301;
    std::vector<std::byte> r(len);
    for (std::size_t k = 0; k < len; ++k) r[k] = static_cast<std::byte>(bytes[b.data.size() + k]);
    for (auto x : r) b.data.push_back(static_cast<std::uint8_t>(x));
    b.offsets.push_back(b.data.size());
    b.records.push_back(std::move(r));
  }
  return b;
}
void write_blob(const std::filesystem::path& path, const blob_data& b, std::vector<hsize_t> chunk,
                int deflate, bool shuffle_fletcher = false) {
  h5_file f(path);
  dataset_spec d;
  d.dims = {b.data.size()};
  d.chunk = std::move(chunk);
  d.deflate = deflate;
  d.shuffle = d.fletcher32 = shuffle_fletcher;
  f.add(d, b.data);
  f.add_offsets(b.offsets);
}
}  // namespace

TEST_CASE("blob layout: contiguous, chunked+deflate, chunked+shuffle+deflate+fletcher32") {
  gpufeed::test::temp_dir dir("h5b");
  const auto b = make_blob(200, 11);
  struct variant {
    const char* name;
    std::vector<hsize_t> chunk;
    int deflate;
    bool sf;
    hdf5_read_path path;
  };
  for (const variant& var :
       {variant{"contiguous", {}, -1, false, hdf5_read_path::pread_raw},
        variant{"chunked raw", {100}, -1, false, hdf5_read_path::pread_raw},
        variant{"chunked deflate", {64}, 6, false, hdf5_read_path::pread_decode},
        variant{"big chunks", {4096}, 6, true, hdf5_read_path::pread_decode},
        variant{"all filters", {37}, 2, true, hdf5_read_path::pread_decode}}) {
    CAPTURE(var.name);
    const auto path = dir / (std::string(var.name) + ".h5");
    write_blob(path, b, var.chunk, var.deflate, var.sf);
    hdf5_source src(path);
    CHECK(src.size() == 200);
    CHECK(src.fixed_record_size() == 0);
    std::size_t biggest = 0;
    for (const auto& r : b.records) biggest = std::max(biggest, r.size());
    CHECK(src.max_record_size() == biggest);
    CHECK(src.shards()[0].layout == "blob");
    CHECK(src.shards()[0].dtype == "uint8");
    CHECK(src.shards()[0].read_path == var.path);
    CHECK(src.shards()[0].data_bytes == b.data.size());
    CHECK(gpufeed::test::count_mismatches(src, b.records) == 0);

    hdf5_options fixed;
    fixed.layout = hdf5_options::layout_kind::fixed;
    hdf5_source as_bytes(path, fixed);  // forced fixed: one byte per record
    CHECK(as_bytes.size() == b.data.size());
    CHECK(as_bytes.fixed_record_size() == 1);
  }
}

TEST_CASE("several shards form one record space, with labels of any integer type") {
  gpufeed::test::temp_dir dir("h5m");
  std::vector<std::vector<std::byte>> expected;
  std::vector<std::int64_t> labels;
  std::vector<std::filesystem::path> paths;
  const std::size_t rows[] = {10, 0, 33, 7};
  for (int k = 0; k < 4; ++k) {
    const auto v = pattern<float>(rows[k] * 8, 20 + k);
    const auto path = dir / ("s" + std::to_string(k) + ".h5");
    h5_file f(path);
    dataset_spec s;
    s.file_type = k == 3 ? H5T_IEEE_F32BE : H5T_IEEE_F32LE;
    s.mem_type = H5T_NATIVE_FLOAT;
    s.dims = {rows[k], 2, 4};
    if (k == 2) {
      s.chunk = {5, 1, 4};
      s.deflate = 7;
    }
    f.add(s, v);
    dataset_spec l;
    l.name = "labels";
    l.dims = {rows[k]};
    std::vector<std::int64_t> lab(rows[k]);
    for (std::size_t i = 0; i < rows[k]; ++i) lab[i] = static_cast<std::int64_t>(i * 3) - 50 + k;
    const hid_t ltypes[] = {H5T_STD_I8LE, H5T_STD_U16BE, H5T_STD_I64LE, H5T_STD_U64LE};
    l.file_type = ltypes[k];
    l.mem_type = H5T_NATIVE_INT64;
    if (k == 1 || k == 3)
      for (auto& x : lab) x = x < 0 ? -x : x;  // unsigned label types
    f.add(l, lab);
    for (auto& r : rows_of(v, 8)) expected.push_back(std::move(r));
    labels.insert(labels.end(), lab.begin(), lab.end());
    paths.push_back(path);
  }
  hdf5_options opt;
  opt.label_dataset = "labels";
  hdf5_source src(paths, opt);
  CHECK(src.size() == 50);
  CHECK(src.has_labels());
  REQUIRE(src.shards().size() == 4);
  CHECK(src.shards()[0].first_record == 0);
  CHECK(src.shards()[1].first_record == 10);
  CHECK(src.shards()[1].records == 0);
  CHECK(src.shards()[2].first_record == 10);
  CHECK(src.shards()[3].first_record == 43);
  CHECK(src.shards()[3].dtype == "float32 big-endian");
  CHECK(gpufeed::test::count_mismatches(src, expected) == 0);
  for (std::uint64_t i = 0; i < src.size(); ++i) CHECK(src.label(i) == labels[i]);

  // Readers stay valid when their source is moved, and after it is destroyed: they share its
  // state (open shards, decoded-chunk cache).
  auto r = src.make_reader();
  std::vector<std::byte> buf(32);
  {
    hdf5_source moved(std::move(src));
    CHECK(moved.size() == 50);
    r.read(49, buf);
    CHECK(std::equal(buf.begin(), buf.end(), expected[49].begin()));
    r.idle();
  }
  r.read(12, buf);
  CHECK(std::equal(buf.begin(), buf.end(), expected[12].begin()));
}

TEST_CASE("dataset in a group, blob offsets beside it") {
  gpufeed::test::temp_dir dir("h5g");
  const auto b = make_blob(30, 4);
  const auto path = dir / "g.h5";
  {
    h5_file f(path);
    gpufeed::test::h5_id g(H5Gcreate2(f.id(), "train", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                           H5Gclose, "H5Gcreate2");
    dataset_spec d;
    d.name = "train/bytes";
    d.dims = {b.data.size()};
    f.add(d, b.data);
    dataset_spec o;
    o.name = "train/offsets";
    o.file_type = H5T_STD_U32LE;  // any unsigned integer type
    o.mem_type = H5T_NATIVE_UINT64;
    o.dims = {b.offsets.size()};
    f.add(o, b.offsets);
  }
  hdf5_options opt;
  opt.dataset = "train/bytes";
  hdf5_source src(path, opt);
  CHECK(src.shards()[0].layout == "blob");
  CHECK(gpufeed::test::count_mismatches(src, b.records) == 0);
}
