// pack() never writes outside out_dir, refuses to clobber what it did not write, cleans up after
// itself, and reports unreadable inputs as io_errors naming the file.
#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "gpufeed/detail/pack_directory.hpp"
#include "gpufeed/hdf5_source.hpp"
#include "gpufeed/pack/hdf5_extras.hpp"
#include "fd_count.hpp"
#include "gpufeed/pack/pack.hpp"
#include "pack_test_util.hpp"
#include "test_util.hpp"

using namespace gpufeed;
namespace fs = std::filesystem;
using gpufeed::test::random_bytes;
using gpufeed::test::write_file;
using gpufeed::test::write_text;

namespace {

// Every path under root (recursive, links not followed), relative.
std::set<std::string> tree(const fs::path& root) {
  std::set<std::string> s;
  for (const auto& e : fs::recursive_directory_iterator(root))
    s.insert(fs::relative(e.path(), root).string());
  return s;
}

}  // namespace

TEST_CASE("names with '..', absolute paths and control characters are data, never paths") {
  gpufeed::test::temp_dir dir("names");
  write_file(dir / "src/a", random_bytes(100, 1));
  write_file(dir / "src/b", random_bytes(0, 2));
  write_text(dir / "src/list.txt", "a\n../src/b\n" + (dir / "src/a").string() + "\n");
  auto in = read_list_file(dir / "src/list.txt");
  REQUIRE(in.size() == 3);
  in.push_back({dir / "src/a", "../../../../etc/evil\nname\r\t\x01", std::nullopt});
  in.push_back({dir / "src/b", "/tmp/absolute", std::nullopt});
  const auto before = tree(dir.path());
  for (const auto format : {shard_format::hdf5, shard_format::lmdb}) {
    pack_options o;
    o.format = format;
    o.shuffle = false;  // the names below in list order
    const fs::path out = dir / "deep/out" / to_string(format);
    const pack_result r = pack(in, out, o);
    const std::string shard = format == shard_format::hdf5 ? "shard-00000.h5" : "shard-00000.lmdb";
    std::set<std::string> want{shard, "manifest.json"};
    if (format == shard_format::lmdb) want.insert(shard + "/data.mdb");
    CHECK(tree(out) == want);
    if (format == shard_format::hdf5) {
      const auto x = read_hdf5_extras(r.shards[0]);
      REQUIRE(x.names.size() == 5);
      CHECK(x.names[0] == "a");
      CHECK(x.names[1] == "../src/b");
      CHECK(x.names[3] == in[3].name);
      CHECK(x.names[4] == "/tmp/absolute");
    }
    // The manifest stays valid JSON whatever the names.
    CHECK(gpufeed::test::read_text(r.manifest).find("\"kind\"") != std::string::npos);
  }
  // Nothing appeared anywhere else under the test directory.
  auto after = tree(dir.path());
  for (auto it = after.begin(); it != after.end();)
    it = it->rfind("deep", 0) == 0 ? after.erase(it) : std::next(it);
  CHECK(after == before);

  in.push_back({dir / "src/a", std::string("nul\0name", 8), std::nullopt});
  CHECK_THROWS_AS((void)pack(in, dir / "nul", {}), config_error);
}

TEST_CASE("out_dir: non-empty refused without force; force removes only pack's own files") {
  gpufeed::test::temp_dir dir("out");
  write_file(dir / "in/a", random_bytes(1000, 1));
  write_file(dir / "in/b", random_bytes(2000, 2));
  const auto in = list_directory(dir / "in", false);
  const fs::path out = dir / "out";
  pack_options o;
  o.shard_bytes = 1500;
  REQUIRE(pack(in, out, o).shards.size() == 2);

  // A stale shard beyond this run's count, a leftover temporary, a foreign file, and a shard-named
  // symlink pointing outside: force replaces the link, never writes through it.
  write_text(out / "shard-00007.h5", "stale");
  write_text(out / ".shard-00003.h5.tmp", "crashed");
  write_text(out / "notes.txt", "mine");
  write_text(dir / "victim", "keep me");
  fs::remove(out / "shard-00001.h5");
  fs::create_symlink(dir / "victim", out / "shard-00001.h5");

  try {
    (void)pack(in, out, o);
    FAIL("expected config_error");
  } catch (const config_error& e) {
    CHECK(e.file() == out.string());
  }
  CHECK(fs::exists(out / "shard-00007.h5"));

  o.force = true;
  const pack_result r = pack(in, out, o);
  CHECK(tree(out) ==
        std::set<std::string>{"manifest.json", "notes.txt", "shard-00000.h5", "shard-00001.h5"});
  CHECK(gpufeed::test::read_text(dir / "victim") == "keep me");
  CHECK(fs::is_regular_file(fs::symlink_status(out / "shard-00001.h5")));
  CHECK(hdf5_source(r.shards).size() == 2);

  // Shards of the other format with the same prefix are pack's own too.
  o.format = shard_format::lmdb;
  (void)pack(in, out, o);
  CHECK(tree(out) == std::set<std::string>{"manifest.json", "notes.txt", "shard-00000.lmdb",
                                           "shard-00000.lmdb/data.mdb", "shard-00001.lmdb",
                                           "shard-00001.lmdb/data.mdb"});

  // Names pack would use but did not write: refused, untouched.
  write_text(out / "shard-00000.lmdb/README", "foreign");
  CHECK_THROWS_AS((void)pack(in, out, o), config_error);
  CHECK(fs::exists(out / "shard-00000.lmdb/README"));
  fs::remove(out / "shard-00000.lmdb/README");
  fs::remove(out / "manifest.json");
  write_text(out / "manifest.json", "{\"someone\": \"else\"}");
  CHECK_THROWS_AS((void)pack(in, out, o), config_error);
  CHECK(gpufeed::test::read_text(out / "manifest.json") == "{\"someone\": \"else\"}");

  write_text(dir / "afile", "x");
  CHECK_THROWS_AS((void)pack(in, dir / "afile", o), config_error);
}

TEST_CASE("an output directory inside the input: refused before anything is deleted") {
  gpufeed::test::temp_dir dir("inout");
  const fs::path in = dir / "in", out = dir / "in/out";
  for (int i = 0; i < 5; ++i) write_file(in / ("f" + std::to_string(i)), random_bytes(100, i));
  for (const auto format : {shard_format::hdf5, shard_format::lmdb}) {
    CAPTURE(to_string(format));
    pack_options o;
    o.format = format;
    o.force = true;
    fs::remove_all(out);
    (void)pack(list_directory(in, false), out, o);  // the first time the listing holds no output
    const std::set<std::string> before = tree(out);
    // `gpufeed pack in -o in/out --force` again: the listing now holds the earlier output.
    const std::vector<pack_input> again = list_directory(in, false);
    REQUIRE(again.size() > 5);
    try {
      (void)pack(again, out, o);
      FAIL("expected config_error");
    } catch (const config_error& e) {
      CHECK(fs::path(e.file()).parent_path().string().rfind(out.string(), 0) == 0);
      CHECK(std::string(e.what()).find("inside the output directory") != std::string::npos);
      CHECK(std::string(e.what()).find(out.string()) != std::string::npos);
    }
    CHECK(tree(out) == before);  // nothing deleted
    // The directory-level check (the CLI's, before listing): names both.
    try {
      detail::pack::refuse_output_inside_input(in, out);
      FAIL("expected config_error");
    } catch (const config_error& e) {
      CHECK(e.file() == out.string());
      CHECK(std::string(e.what()).find("'" + in.string() + "'") != std::string::npos);
    }
    CHECK_NOTHROW(detail::pack::refuse_output_inside_input(in, dir / "elsewhere"));
    CHECK_NOTHROW(detail::pack::refuse_output_inside_input(in, dir / "in2"));
  }
}

TEST_CASE("unreadable inputs: io_error naming the file; out_dir untouched or cleaned up") {
  gpufeed::test::temp_dir dir("unread");
  write_file(dir / "in/a", random_bytes(100, 1));
  auto in = list_directory(dir / "in", false);
  const fs::path out = dir / "out";

  auto expect_io = [&](const std::vector<pack_input>& inputs, const fs::path& file) {
    try {
      (void)pack(inputs, out, {});
      FAIL("expected io_error");
    } catch (const io_error& e) {
      CHECK(e.file() == file.string());
    }
    CHECK_FALSE(fs::exists(out));
  };
  auto missing = in;
  missing.push_back({dir / "in/missing", "missing", std::nullopt});
  expect_io(missing, dir / "in/missing");
  auto a_dir = in;
  a_dir.push_back({dir / "in", "dir", std::nullopt});
  expect_io(a_dir, dir / "in");
  if (::geteuid() != 0) {  // root reads anything
    write_file(dir / "in/locked", random_bytes(10, 3));
    fs::permissions(dir / "in/locked", fs::perms::none);
    auto locked = in;
    locked.push_back({dir / "in/locked", "locked", std::nullopt});
    try {
      (void)pack(locked, out, {});
      FAIL("expected io_error");
    } catch (const io_error& e) {
      CHECK(e.file() == (dir / "in/locked").string());
      CHECK(e.api() == "open");
    }
    fs::permissions(dir / "in/locked", fs::perms::owner_all);
    fs::remove_all(out);
  }
}

TEST_CASE("a file that changes size while packing: io_error, no shard or temporary stays, no descriptor leaks") {
  gpufeed::test::temp_dir dir("shrink");
  std::vector<pack_input> in;
  for (int i = 0; i < 24; ++i) {
    const fs::path p = dir / ("in/f" + std::to_string(i));
    write_file(p, random_bytes(1u << 20, static_cast<std::uint32_t>(i)));
    in.push_back({p, p.filename().string(), std::nullopt});
  }
  for (const auto format : {shard_format::hdf5, shard_format::lmdb}) {
    // One reading thread, so at most 4 batches of 4 MiB are read ahead of the writer when it
    // reports progress for the first time (after batch 0): the last file (23-24 MiB in) is still
    // unread then. Shard 0 (files 0-19) is complete when the error comes: it is removed too.
    write_file(in.back().path, random_bytes(1u << 20, 11));
    pack_options o;
    o.format = format;
    o.threads = 1;
    o.shard_bytes = 20u << 20;
    bool shrunk = false;
    o.progress = [&](const pack_progress&) {
      if (!shrunk) fs::resize_file(in.back().path, 1000);
      shrunk = true;
    };
    const fs::path out = dir / to_string(format);
    try {
      (void)pack(in, out, o);
      FAIL("expected io_error");
    } catch (const io_error& e) {
      CHECK(e.file() == in.back().path.string());
      CHECK(std::string(e.what()).find("changed size") != std::string::npos);
    }
    CHECK(fs::is_empty(out));
    // The shrunk file is found at open (its size is checked then): its descriptor is closed.
    CHECK(gpufeed::test::fds_under(fs::canonical(dir / "in")) == 0);
  }
}

TEST_CASE("while pack runs, its directory is always a pack that did not finish, until the manifest") {
  // kill -9 may come at any moment: between one shard's rename and the next one's temporary, or
  // after the last shard while --verify reads them back. Whatever it leaves must be refused as
  // unfinished, never taken for a complete set of shards.
  gpufeed::test::temp_dir dir("marked");
  std::vector<pack_input> in;
  for (int i = 0; i < 12; ++i) {
    const fs::path p = dir / ("in/f" + std::to_string(i));
    write_file(p, random_bytes(1u << 20, static_cast<std::uint32_t>(i)));
    in.push_back({p, p.filename().string(), std::nullopt});
  }
  for (const auto format : {shard_format::hdf5, shard_format::lmdb}) {
    CAPTURE(to_string(format));
    pack_options o;
    o.format = format;
    o.threads = 1;
    o.shard_bytes = 4u << 20;
    o.verify = true;
    const fs::path out = dir / to_string(format);
    const std::string shard0 = format == shard_format::hdf5 ? "shard-00000.h5" : "shard-00000.lmdb";
    std::size_t asked = 0, unmarked = 0, between = 0;
    o.cancelled = [&] {
      if (!fs::exists(out)) return false;  // not prepared yet
      ++asked;
      if (gpufeed::detail::find_pack_leftovers(out).empty()) ++unmarked;
      // Only finished shards of final names: the window a plain temporary per shard left open.
      bool temp = false;
      for (const auto& e : fs::directory_iterator(out)) {
        const std::string n = e.path().filename().string();
        temp = temp || (n.ends_with(".tmp") && n != ".manifest.json.tmp");
      }
      if (!temp && fs::exists(out / shard0)) ++between;
      return false;
    };
    const pack_result r = pack(in, out, o);
    CHECK(r.shards.size() == 3);
    CHECK(asked > 3);
    CHECK(between >= 3);  // verify asks once per shard, every shard renamed by then
    CHECK(unmarked == 0);
    // Finished: the manifest replaced the mark, and the sources take the directory.
    CHECK(fs::exists(out / "manifest.json"));
    CHECK_FALSE(fs::exists(out / ".manifest.json.tmp"));
    CHECK(gpufeed::detail::find_pack_leftovers(out).empty());
  }
}

TEST_CASE("a pack that fails or is cancelled removes its in-progress mark with its shards") {
  gpufeed::test::temp_dir dir("unmark");
  std::vector<pack_input> in;
  for (int i = 0; i < 6; ++i) {
    const fs::path p = dir / ("in/f" + std::to_string(i));
    write_file(p, random_bytes(1u << 20, static_cast<std::uint32_t>(100 + i)));
    in.push_back({p, p.filename().string(), std::nullopt});
  }
  pack_options o;
  o.threads = 1;
  o.shard_bytes = 2u << 20;
  int calls = 0;
  o.cancelled = [&] { return ++calls > 3; };
  const fs::path out = dir / "out";
  CHECK_THROWS_AS((void)pack(in, out, o), cancelled_error);
  CHECK(fs::is_empty(out));
}
