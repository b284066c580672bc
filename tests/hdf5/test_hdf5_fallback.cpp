// Layouts gpufeed does not read itself go through H5Dread: still exact, and reported as
// h5dread_fallback with the reason.
#include <doctest/doctest.h>

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "gpufeed/hdf5_source.hpp"
#include "h5_writer.hpp"
#include "hdf5_test_util.hpp"
#include "test_util.hpp"

using namespace gpufeed;
using gpufeed::test::dataset_spec;
using gpufeed::test::h5_file;
using gpufeed::test::pattern;
using gpufeed::test::rows_of;

namespace {
void expect_fallback(const hdf5_source& src, const std::string& storage, const std::string& says) {
  CHECK(src.uses_fallback());
  const auto& info = src.shards().at(0);
  CHECK(info.read_path == hdf5_read_path::h5dread_fallback);
  CHECK(to_string(info.read_path) == "h5dread_fallback");
  CHECK(info.storage == storage);
  CHECK(info.fallback_reason.find(says) != std::string::npos);
}
}  // namespace

TEST_CASE("compact storage") {
  gpufeed::test::temp_dir dir("h5fc");
  const auto v = pattern<std::int32_t>(12 * 8, 1);
  {
    h5_file f(dir / "c.h5");
    dataset_spec s;
    s.file_type = H5T_STD_I32BE;
    s.mem_type = H5T_NATIVE_INT32;
    s.dims = {12, 8};
    s.compact = true;
    f.add(s, v);
  }
  hdf5_source src(dir / "c.h5");
  expect_fallback(src, "compact", "compact");
  CHECK(src.shards()[0].dtype == "int32 big-endian");
  CHECK(gpufeed::test::count_mismatches(src, rows_of(v, 8)) == 0);
}

TEST_CASE("nbit and scaleoffset filters") {
  gpufeed::test::temp_dir dir("h5fn");
  auto v = pattern<std::int16_t>(30 * 6, 2);
  for (auto& x : v) x = static_cast<std::int16_t>(x % 1000);  // let scaleoffset pack them
  for (const char* filter : {"nbit", "scaleoffset"}) {
    CAPTURE(filter);
    const auto path = dir / (std::string(filter) + ".h5");
    {
      h5_file f(path);
      dataset_spec s;
      s.file_type = H5T_STD_I16LE;
      s.mem_type = H5T_NATIVE_INT16;
      s.dims = {30, 6};
      s.chunk = {7, 4};
      s.nbit = std::string(filter) == "nbit";
      s.scaleoffset = !s.nbit;
      s.deflate = 3;
      f.add(s, v);
    }
    hdf5_source src(path);
    expect_fallback(src, "chunked", filter);
    const auto& filters = src.shards()[0].filters;
    CHECK(filters.size() == 2);
    CHECK(filters[0] == filter);
    CHECK(filters[1] == "deflate(3)");
    CHECK(gpufeed::test::count_mismatches(src, rows_of(v, 6)) == 0);
  }
}

TEST_CASE("external storage") {
  gpufeed::test::temp_dir dir("h5fx");
  const auto v = pattern<float>(9 * 5, 3);
  {
    h5_file f(dir / "x.h5");
    dataset_spec s;
    s.file_type = H5T_IEEE_F32LE;
    s.mem_type = H5T_NATIVE_FLOAT;
    s.dims = {9, 5};
    s.external = (dir / "x.raw").string();
    f.add(s, v);
  }
  hdf5_source src(dir / "x.h5");
  expect_fallback(src, "external", "external");
  CHECK(gpufeed::test::count_mismatches(src, rows_of(v, 5)) == 0);
}

TEST_CASE("chunks never written: HDF5 supplies the fill value") {
  gpufeed::test::temp_dir dir("h5fu");
  auto v = pattern<std::uint16_t>(20 * 3, 4);
  {
    h5_file f(dir / "u.h5");
    dataset_spec s;
    s.file_type = H5T_STD_U16LE;
    s.mem_type = H5T_NATIVE_UINT16;
    s.dims = {20, 3};
    s.chunk = {5, 3};
    s.deflate = 1;
    s.write_rows = 10;  // chunks 2 and 3 are never written
    f.add(s, v);
  }
  for (std::size_t k = 30; k < v.size(); ++k) v[k] = 0;  // default fill value
  hdf5_source src(dir / "u.h5");
  expect_fallback(src, "chunked", "fill value");
  CHECK(gpufeed::test::count_mismatches(src, rows_of(v, 3)) == 0);

  // A contiguous dataset that was never written at all.
  {
    h5_file f(dir / "w.h5");
    dataset_spec s;
    s.file_type = H5T_STD_U16LE;
    s.mem_type = H5T_NATIVE_UINT16;
    s.dims = {4, 3};
    s.write = false;
    f.add(s, v);
  }
  hdf5_source w(dir / "w.h5");
  expect_fallback(w, "contiguous", "fill value");
  CHECK(gpufeed::test::count_mismatches(w, rows_of(std::vector<std::uint16_t>(12, 0), 3)) == 0);
}

TEST_CASE("a type HDF5 must convert: 12-bit precision integers") {
  gpufeed::test::temp_dir dir("h5fp");
  auto v = pattern<std::int16_t>(8 * 4, 5);
  for (auto& x : v) x = static_cast<std::int16_t>(x % 2000);  // fits in 12 signed bits
  {
    h5_file f(dir / "p.h5");
    gpufeed::test::h5_id t(H5Tcopy(H5T_STD_I16LE), H5Tclose, "H5Tcopy");
    H5Tset_precision(t, 12);
    dataset_spec s;
    s.file_type = t;
    s.mem_type = H5T_NATIVE_INT16;
    s.dims = {8, 4};
    f.add(s, v);
  }
  hdf5_source src(dir / "p.h5");
  expect_fallback(src, "contiguous", "datatype");
  CHECK(gpufeed::test::count_mismatches(src, rows_of(v, 4)) == 0);
}

TEST_CASE("virtual dataset") {
  gpufeed::test::temp_dir dir("h5fv");
  const auto v = pattern<std::int64_t>(6 * 2, 6);
  {
    h5_file f(dir / "v.h5");
    dataset_spec s;
    s.name = "source";
    s.file_type = H5T_STD_I64LE;
    s.mem_type = H5T_NATIVE_INT64;
    s.dims = {6, 2};
    f.add(s, v);
    const hsize_t dims[2] = {6, 2};
    gpufeed::test::h5_id space(H5Screate_simple(2, dims, nullptr), H5Sclose, "H5Screate_simple");
    gpufeed::test::h5_id dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose, "H5Pcreate");
    gpufeed::test::h5_check(H5Pset_virtual(dcpl, space, ".", "source", space), "H5Pset_virtual");
    gpufeed::test::h5_id d(
        H5Dcreate2(f.id(), "data", H5T_STD_I64LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT), H5Dclose,
        "H5Dcreate2");
  }
  hdf5_source src(dir / "v.h5");
  expect_fallback(src, "virtual", "virtual");
  CHECK(gpufeed::test::count_mismatches(src, rows_of(v, 2)) == 0);
}

TEST_CASE("blob layout through the fallback") {
  gpufeed::test::temp_dir dir("h5fb");
  const auto data = pattern<std::uint8_t>(500, 7);
  const std::vector<std::uint64_t> offsets = {0, 3, 3, 200, 499, 500};
  {
    h5_file f(dir / "b.h5");
    dataset_spec d;
    d.dims = {500};
    d.compact = true;
    f.add(d, data);
    f.add_offsets(offsets);
  }
  hdf5_source src(dir / "b.h5");
  expect_fallback(src, "compact", "compact");
  std::vector<std::vector<std::byte>> expected;
  for (std::size_t i = 0; i + 1 < offsets.size(); ++i) {
    const auto* p = reinterpret_cast<const std::byte*>(data.data());
    expected.emplace_back(p + offsets[i], p + offsets[i + 1]);
  }
  CHECK(gpufeed::test::count_mismatches(src, expected) == 0);
}

TEST_CASE("an optional filter this HDF5 does not have, skipped by every chunk") {
  constexpr H5Z_filter_t unregistered_filter = 65261;
  gpufeed::test::temp_dir dir("h5fo");
  const auto v = pattern<std::int32_t>(8 * 4, 8);
  {
    h5_file f(dir / "o.h5");
    const hsize_t dims[2] = {8, 4}, chunk[2] = {2, 4};
    gpufeed::test::h5_id space(H5Screate_simple(2, dims, nullptr), H5Sclose, "H5Screate_simple");
    gpufeed::test::h5_id dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose, "H5Pcreate");
    H5Pset_chunk(dcpl, 2, chunk);
    // A private filter id (unregistered range 32768-65535) that no plugin package and no
    // test registers, so neither libhdf5 nor HDF5_PLUGIN_PATH has it: writing skips it and marks
    // every chunk's mask. (32000, LZF, was used here and is installed by hdf5-plugin-lzf.)
    gpufeed::test::h5_check(H5Pset_filter(dcpl, unregistered_filter, H5Z_FLAG_OPTIONAL, 0, nullptr),
                            "H5Pset_filter");
    H5Pset_deflate(dcpl, 1);
    gpufeed::test::h5_id d(
        H5Dcreate2(f.id(), "data", H5T_STD_I32LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT), H5Dclose,
        "H5Dcreate2");
    gpufeed::test::h5_check(H5Dwrite(d, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()),
                            "H5Dwrite");
  }
  hdf5_source src(dir / "o.h5");
  expect_fallback(src, "chunked", "plugin missing");
  CHECK(src.shards()[0].filters == std::vector<std::string>{"unknown(65261)", "deflate(1)"});
  CHECK(gpufeed::test::count_mismatches(src, rows_of(v, 4)) == 0);
}
