// Bad input: each case must throw the right gpufeed error type, naming the file and, where there
// is one, the record — never crash, print HDF5's error stack, or return wrong bytes.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "gpufeed/detail/io/map_fault_guard.hpp"
#include "gpufeed/hdf5_source.hpp"
#include "h5_writer.hpp"
#include "test_util.hpp"

using namespace gpufeed;
using gpufeed::test::dataset_spec;
using gpufeed::test::h5_file;
using gpufeed::test::pattern;

namespace {

// Runs f and returns the E it throws; fails the test on no exception or on another type.
template <class E, class F>
std::optional<E> thrown(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e;
  } catch (const std::exception& e) {
    FAIL_CHECK("wrong exception type: " << e.what());
    return std::nullopt;
  }
  FAIL_CHECK("no exception thrown");
  return std::nullopt;
}

std::filesystem::path write_fixed(const std::filesystem::path& path, std::vector<hsize_t> chunk,
                                  int deflate, bool fletcher, hsize_t rows = 20) {
  h5_file f(path);
  dataset_spec s;
  s.file_type = H5T_STD_I32LE;
  s.mem_type = H5T_NATIVE_INT32;
  s.dims = {rows, 10};
  s.chunk = std::move(chunk);
  s.deflate = deflate;
  s.fletcher32 = fletcher;
  f.add(s, pattern<std::int32_t>(rows * 10, 2));
  return path;
}

void write_blob(const std::filesystem::path& path, std::size_t data_len,
                const std::vector<std::uint64_t>& offsets, hid_t offsets_type = H5T_STD_U64LE) {
  h5_file f(path);
  dataset_spec d;
  d.dims = {data_len};
  f.add(d, pattern<std::uint8_t>(data_len));
  f.add_offsets(offsets, offsets_type);
}

void read_all(const hdf5_source& src) {
  auto r = src.make_reader();
  std::vector<std::byte> buf(src.max_record_size());
  for (std::uint64_t i = 0; i < src.size(); ++i) r.read(i, buf);
}

}  // namespace

TEST_CASE("missing, non-HDF5 and empty files") {
  gpufeed::test::temp_dir dir("h5e");
  auto e = thrown<io_error>([&] { hdf5_source s(dir / "nope.h5"); });
  REQUIRE(e);
  CHECK(e->file() == (dir / "nope.h5").string());
  CHECK(e->api() == "open");
  CHECK(e->status() == ENOENT);

  std::ofstream(dir / "text.h5") << "this is not an HDF5 file, just some text\n";
  auto f = thrown<format_error>([&] { hdf5_source s(dir / "text.h5"); });
  REQUIRE(f);
  CHECK(f->file() == (dir / "text.h5").string());
  CHECK(f->message() == "not an HDF5 file");

  std::ofstream(dir / "empty.h5").close();
  auto g = thrown<format_error>([&] { hdf5_source s(dir / "empty.h5"); });
  REQUIRE(g);
  CHECK(g->file() == (dir / "empty.h5").string());

  CHECK(thrown<config_error>([&] { hdf5_source s(std::vector<std::filesystem::path>{}); }));
}

TEST_CASE("truncated file: refused at open") {
  gpufeed::test::temp_dir dir("h5t");
  for (bool chunked : {false, true}) {
    CAPTURE(chunked);
    const auto path =
        write_fixed(dir / "t.h5", chunked ? std::vector<hsize_t>{4, 10} : std::vector<hsize_t>{},
                    chunked ? 1 : -1, false, 2000);
    std::filesystem::resize_file(path, std::filesystem::file_size(path) / 2);
    auto e = thrown<format_error>([&] { hdf5_source s(path); });
    REQUIRE(e);
    CHECK(e->file() == path.string());
    CHECK(std::string(e->what()).find("truncated") != std::string::npos);
  }
}

TEST_CASE("file truncated after open: io_error at read, naming the record") {
  gpufeed::test::temp_dir dir("h5u");
  for (bool chunked : {false, true}) {
    CAPTURE(chunked);
    const auto path =
        write_fixed(dir / "u.h5", chunked ? std::vector<hsize_t>{4, 10} : std::vector<hsize_t>{},
                    chunked ? 1 : -1, false, 2000);
    for (const auto reads : {hdf5_options::read_method::pread, hdf5_options::read_method::map}) {
      CAPTURE(static_cast<int>(reads));
      if (!gpufeed::detail::io::map_faults_guarded && reads == hdf5_options::read_method::map)
        continue;  // the SIGBUS guard does not work under ThreadSanitizer
      hdf5_options o;
      o.reads = reads;
      write_fixed(path, chunked ? std::vector<hsize_t>{4, 10} : std::vector<hsize_t>{},
                  chunked ? 1 : -1, false, 2000);
      hdf5_source src(path, o);
      std::filesystem::resize_file(path, std::filesystem::file_size(path) / 2);
      auto e = thrown<io_error>([&] { read_all(src); });
      REQUIRE(e);
      CHECK(e->file() == path.string());
      REQUIRE(e->record());
      CHECK(*e->record() > 0);
      CHECK(*e->record() < 2000);
      CHECK(e->api() == (reads == hdf5_options::read_method::map ? "mmap" : "pread"));
    }
  }
}

TEST_CASE("missing datasets") {
  gpufeed::test::temp_dir dir("h5m");
  const auto path = write_fixed(dir / "m.h5", {}, -1, false);
  hdf5_options o;
  o.dataset = "images";
  auto e = thrown<format_error>([&] { hdf5_source s(path, o); });
  REQUIRE(e);
  CHECK(e->file() == path.string());
  CHECK(e->message().find("'images'") != std::string::npos);
  CHECK(e->api() == "H5Dopen2");

  o = {};
  o.label_dataset = "labels";
  auto l = thrown<format_error>([&] { hdf5_source s(path, o); });
  REQUIRE(l);
  CHECK(l->message().find("'labels'") != std::string::npos);

  o = {};
  o.layout = hdf5_options::layout_kind::blob;  // blob asked for, but there is no "offsets"
  auto b = thrown<format_error>([&] { hdf5_source s(path, o); });
  REQUIRE(b);
  CHECK(b->message().find("'offsets'") != std::string::npos);
}

TEST_CASE("unsupported dtypes: compound, string; scalar dataset") {
  gpufeed::test::temp_dir dir("h5y");
  const auto path = dir / "y.h5";
  {
    h5_file f(path);
    struct pair {
      std::int32_t a;
      float b;
    };
    gpufeed::test::h5_id ct(H5Tcreate(H5T_COMPOUND, sizeof(pair)), H5Tclose, "H5Tcreate");
    H5Tinsert(ct, "a", HOFFSET(pair, a), H5T_NATIVE_INT32);
    H5Tinsert(ct, "b", HOFFSET(pair, b), H5T_NATIVE_FLOAT);
    dataset_spec c;
    c.name = "compound";
    c.file_type = c.mem_type = ct;
    c.dims = {4};
    std::vector<pair> pv(4, pair{1, 2.f});
    f.add(c, pv);
    gpufeed::test::h5_id st(H5Tcopy(H5T_C_S1), H5Tclose, "H5Tcopy");
    H5Tset_size(st, 8);
    dataset_spec s;
    s.name = "strings";
    s.file_type = s.mem_type = st;
    s.dims = {3};
    f.add_raw(s, "abcdefghijklmnopqrstuvwx");
    gpufeed::test::h5_id sc(H5Screate(H5S_SCALAR), H5Sclose, "H5Screate");
    gpufeed::test::h5_id sd(
        H5Dcreate2(f.id(), "scalar", H5T_STD_I32LE, sc, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
        H5Dclose, "H5Dcreate2");
  }
  for (const char* name : {"compound", "strings"}) {
    CAPTURE(name);
    hdf5_options o;
    o.dataset = name;
    auto e = thrown<unsupported_error>([&] { hdf5_source s(path, o); });
    REQUIRE(e);
    CHECK(e->file() == path.string());
  }
  hdf5_options o;
  o.dataset = "scalar";
  CHECK(thrown<format_error>([&] { hdf5_source s(path, o); }));
}

TEST_CASE("fletcher32 mismatch in a stored chunk: corrupt_error for that chunk's records only") {
  gpufeed::test::temp_dir dir("h5f");
  for (int deflate : {-1, 6}) {
    CAPTURE(deflate);
    const auto path = write_fixed(dir / "f.h5", {4, 10}, deflate, true);
    const auto [addr, size] = gpufeed::test::chunk_extent(path, "data", {8, 0});
    gpufeed::test::flip_byte(path, addr + size / 2);
    hdf5_source src(path);
    auto r = src.make_reader();
    std::vector<std::byte> buf(40);
    for (std::uint64_t i = 0; i < 20; ++i) {
      CAPTURE(i);
      if (i >= 8 && i < 12) {
        auto e = thrown<corrupt_error>([&] { r.read(i, buf); });
        REQUIRE(e);
        CHECK(e->file() == path.string());
        CHECK(e->record() == i);
        CHECK(e->api() == "fletcher32");
        auto e2 = thrown<corrupt_error>([&] { src.read(i, buf); });
        REQUIRE(e2);
        CHECK(e2->record() == i);
      } else {
        r.read(i, buf);
        const auto v = pattern<std::int32_t>(200, 2);
        CHECK(std::memcmp(buf.data(), v.data() + i * 10, 40) == 0);
      }
    }
  }
}

TEST_CASE("corrupt deflate stream: corrupt_error naming file and record") {
  gpufeed::test::temp_dir dir("h5z");
  for (hsize_t rows_per_chunk : {1, 4}) {  // decoded into the record / into the reader's cache
    CAPTURE(rows_per_chunk);
    const auto path = write_fixed(dir / "z.h5", {rows_per_chunk, 10}, 6, false);
    const auto [addr, size] = gpufeed::test::chunk_extent(path, "data", {4, 0});
    gpufeed::test::flip_byte(path, addr + size / 2, 0xff);
    hdf5_source src(path);
    auto e = thrown<corrupt_error>([&] {
      std::vector<std::byte> buf(40);
      src.read(4, buf);
    });
    REQUIRE(e);
    CHECK(e->file() == path.string());
    CHECK(e->record() == 4);
    CHECK(e->api() == "libdeflate_zlib_decompress");
  }
}

TEST_CASE("bad blob offsets") {
  gpufeed::test::temp_dir dir("h5o");
  struct bad {
    const char* name;
    std::vector<std::uint64_t> offsets;
    std::optional<std::uint64_t> record;
    const char* says;
  };
  for (const bad& b : {bad{"decreasing", {0, 10, 30, 20, 100}, 2, "decrease"},
                       bad{"past the data", {0, 10, 30, 130, 100}, 2, "past the end"},
                       bad{"missing last entry", {0, 10, 30, 60}, std::nullopt, "N+1"},
                       bad{"extra entry", {0, 10, 30, 60, 100, 100, 120}, 5, "past the end"},
                       bad{"not starting at 0", {5, 10, 100}, 0, "expected 0"},
                       bad{"empty", {}, std::nullopt, "empty"}}) {
    CAPTURE(b.name);
    const auto path = dir / "o.h5";
    write_blob(path, 100, b.offsets);
    auto e = thrown<format_error>([&] { hdf5_source s(path); });
    REQUIRE(e);
    CHECK(e->file() == path.string());
    CHECK(e->record() == b.record);
    CHECK(e->message().find(b.says) != std::string::npos);
  }
  const auto path = dir / "f.h5";
  write_blob(path, 100, {0, 50, 100}, H5T_IEEE_F64LE);  // offsets must be unsigned integers
  auto e = thrown<format_error>([&] { hdf5_source s(path); });
  REQUIRE(e);
  CHECK(e->message().find("unsigned") != std::string::npos);
}

TEST_CASE("bad labels, mismatched shards") {
  gpufeed::test::temp_dir dir("h5l");
  const auto a = write_fixed(dir / "a.h5", {}, -1, false, 20);
  {
    h5_file f(dir / "b.h5");
    dataset_spec s;
    s.file_type = H5T_STD_I32LE;
    s.mem_type = H5T_NATIVE_INT32;
    s.dims = {5, 11};  // other row shape
    f.add(s, pattern<std::int32_t>(55));
    dataset_spec l;
    l.name = "labels";
    l.file_type = H5T_IEEE_F32LE;  // labels must be integers
    l.mem_type = H5T_NATIVE_FLOAT;
    l.dims = {5};
    f.add(l, std::vector<float>(5, 1.f));
    dataset_spec l2;
    l2.name = "short_labels";
    l2.file_type = H5T_STD_I32LE;
    l2.mem_type = H5T_NATIVE_INT32;
    l2.dims = {4};  // one per record: 5 needed
    f.add(l2, std::vector<std::int32_t>(4, 1));
  }
  hdf5_options no_labels;  // b.h5's bad labels would fail first: this is about the row shape
  no_labels.label_dataset = "";
  // Eager: at construction. Lazy (the default): from the first use of one of b.h5's records.
  hdf5_options eager = no_labels;
  eager.open = hdf5_options::open_kind::eager;
  auto m = thrown<format_error>([&] { hdf5_source s(std::vector{a, dir / "b.h5"}, eager); });
  REQUIRE(m);
  CHECK(m->file() == (dir / "b.h5").string());
  hdf5_source lazy(std::vector{a, dir / "b.h5"}, no_labels);
  std::vector<std::byte> row(lazy.max_record_size());
  lazy.read(0, row);  // a.h5's records read
  m = thrown<format_error>([&] { lazy.read(20, row); });
  REQUIRE(m);
  CHECK(m->file() == (dir / "b.h5").string());
  for (const char* name : {"labels", "short_labels"}) {
    CAPTURE(name);
    hdf5_options o;
    o.label_dataset = name;
    auto e = thrown<format_error>([&] { hdf5_source s(dir / "b.h5", o); });
    REQUIRE(e);
    CHECK(e->file() == (dir / "b.h5").string());
  }
}

TEST_CASE("out-of-range index, destination too small, no labels: config_error") {
  gpufeed::test::temp_dir dir("h5r");
  const auto path = write_fixed(dir / "r.h5", {3, 10}, 2, false);
  hdf5_source src(path);
  std::vector<std::byte> buf(40);
  auto e = thrown<config_error>([&] { src.read(20, buf); });
  REQUIRE(e);
  CHECK(e->record() == 20);
  auto r = src.make_reader();
  CHECK(thrown<config_error>([&] { r.read(1000, buf); })->record() == 1000);
  CHECK(thrown<config_error>([&] { (void)src.record_size(20); })->record() == 20);
  auto small = thrown<config_error>([&] { r.read(7, std::span(buf).first(39)); });
  REQUIRE(small);
  CHECK(small->record() == 7);
  CHECK(small->file() == path.string());
  CHECK(thrown<config_error>([&] { (void)src.label(3); }));
  r.read(7, buf);  // the reader still works after refusing
}

TEST_CASE("HDF5 prints nothing to stderr for gpufeed's failed calls") {
  gpufeed::test::temp_dir dir("h5s");
  const auto path = write_fixed(dir / "s.h5", {}, -1, false);
  std::ofstream(dir / "text.h5") << "not hdf5";
  const auto log = dir / "stderr.txt";
  std::fflush(stderr);
  const int saved = ::dup(2);
  const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  ::dup2(fd, 2);
  ::close(fd);
  hdf5_options o;
  o.dataset = "missing";
  int failures = 0;
  try {
    hdf5_source s(path, o);
  } catch (const format_error&) {
    ++failures;
  }
  try {
    hdf5_source s(dir / "text.h5");
  } catch (const format_error&) {
    ++failures;
  }
  std::fflush(stderr);
  ::dup2(saved, 2);
  ::close(saved);
  CHECK(failures == 2);
  CHECK(std::filesystem::file_size(log) == 0);
}
