// The built `gpufeed` binary: pack + inspect --checksums against crc32 computed here from the
// original files; inspect --json; bad inputs exit 1 with one stderr line naming the file.
#include <doctest/doctest.h>
#include <hdf5.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <CLI/Error.hpp>
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "h5_writer.hpp"
#include "pack_test_util.hpp"
#include "test_util.hpp"

namespace fs = std::filesystem;
using gpufeed::test::bytes;
using gpufeed::test::read_text;
using gpufeed::test::write_file;
using gpufeed::test::write_text;

namespace {

struct run_result {
  int code = -1;
  std::string out, err;
};

std::string quote(const std::string& s) {
  std::string q = "'";
  for (const char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// Runs gpufeed with `args`; stdout and stderr captured through files in `dir`.
run_result gpufeed_run(const fs::path& dir, const std::vector<std::string>& args) {
  std::string cmd = quote(GPUFEED_CLI_PATH);
  for (const auto& a : args) cmd += " " + quote(a);
  const fs::path out = dir / "stdout.txt", err = dir / "stderr.txt";
  cmd += " >" + quote(out.string()) + " 2>" + quote(err.string()) + " </dev/null";
  const int status = std::system(cmd.c_str());
  run_result r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = read_text(out);
  r.err = read_text(err);
  return r;
}

std::size_t lines(const std::string& s) {
  return static_cast<std::size_t>(std::count(s.begin(), s.end(), '\n'));
}

// "INDEX SIZE CRC32" lines computed from the input tree, in the order of `names` (files sorted
// by relative path when empty).
std::string expected_checksums(const fs::path& root, std::vector<std::string> names = {}) {
  if (names.empty()) {
    for (const auto& e : fs::recursive_directory_iterator(root))
      if (e.is_regular_file()) names.push_back(fs::relative(e.path(), root).generic_string());
    std::sort(names.begin(), names.end());
  }
  std::string text;
  for (std::size_t i = 0; i < names.size(); ++i) {
    const bytes b = gpufeed::test::read_file(root / names[i]);
    char line[64];
    std::snprintf(line, sizeof line, "%zu %zu %08x\n", i, b.size(),
                  static_cast<unsigned>(gpufeed::test::crc_of(b)));
    text += line;
  }
  return text;
}

// The shard paths in out, in name (= record) order.
std::vector<std::string> shards_in(const fs::path& out) {
  std::vector<std::string> v;
  for (const auto& e : fs::directory_iterator(out))
    if (e.path().filename() != "manifest.json") v.push_back(e.path().string());
  std::sort(v.begin(), v.end());
  return v;
}

std::vector<std::string> with(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Exit code 1, nothing but one line on stderr, naming `file`.
void expect_one_line_failure(const run_result& r, const std::string& file,
                             const std::string& what = {}) {
  CAPTURE(r.err);
  CHECK(r.code == 1);
  CHECK(lines(r.err) == 1);
  CHECK(r.err.find("error: ") != std::string::npos);
  if (!file.empty()) CHECK(r.err.find("'" + file + "'") != std::string::npos);
  if (!what.empty()) CHECK(r.err.find(what) != std::string::npos);
}

}  // namespace

TEST_CASE("pack + inspect --checksums equals crc32 of the original files, every format") {
  gpufeed::test::temp_dir dir("cli");
  const fs::path root = dir / "in";
  gpufeed::test::make_tree(root, 60, 4000, 3, 21, true);
  const std::string sorted = expected_checksums(root);
  struct variant {
    const char* name;
    std::vector<std::string> pack, inspect;
  };
  const std::vector<variant> variants = {
      {"hdf5", {}, {}},
      {"hdf5-deflate", {"--deflate", "6", "--chunk-size", "8KiB"}, {}},
      {"hdf5-lz4", {"--compress", "lz4", "--chunk-size", "8KiB", "--seed", "5"}, {}},
      {"hdf5-zstd", {"--compress", "zstd:9", "--chunk-size", "8KiB", "--no-shuffle"}, {}},
      {"hdf5-bitshuffle", {"--compress", "bitshuffle-lz4", "--chunk-size", "8KiB"}, {}},
      {"hdf5-labels", {"--labels", "--threads", "1"}, {}},
      {"lmdb", {"--format", "lmdb"}, {}},
      {"lmdb-datum", {"--format", "lmdb", "--datum", "--labels"}, {"--datum"}},
      // The README's command: --labels with LMDB stores Datum values, and inspect reads them as
      // Datum from the manifest, without --datum.
      {"lmdb-labels", {"--format", "lmdb", "--labels"}, {}},
  };
  for (const auto& v : variants) {
    CAPTURE(v.name);
    const fs::path out = dir / v.name;
    const run_result p = gpufeed_run(dir.path(), with({"pack", root.string(), "-o", out.string(),
                                                       "--shard-size", "40KB", "--verify"},
                                                      v.pack));
    CAPTURE(p.err);
    REQUIRE(p.code == 0);
    CHECK(p.out.find("packed 60 files") != std::string::npos);
    CHECK(lines(p.err) >= 2);  // not a terminal: progress lines (final pack + verify)
    const auto shards = shards_in(out);
    CHECK(shards.size() >= 3);
    // Records in the manifest's index -> name order: shuffled unless --no-shuffle.
    const auto manifest = nlohmann::json::parse(read_text(out / "manifest.json"));
    const auto names = manifest["names"].get<std::vector<std::string>>();
    const std::string want = expected_checksums(root, names);
    const bool kept = std::string(v.name) == "hdf5-zstd";
    CHECK((want == sorted) == kept);
    CHECK(manifest["order"]["shuffled"] == !kept);
    CHECK(manifest["order"]["seed"] == (std::string(v.name) == "hdf5-lz4" ? 5 : 0));
    // inspect --names prints that map, from the shards (HDF5) or the manifest (LMDB).
    const run_result nm = gpufeed_run(dir.path(), with({"inspect", "--names"}, shards));
    CHECK(nm.code == 0);
    std::string want_names;
    for (std::size_t i = 0; i < names.size(); ++i)
      want_names += std::to_string(i) + " " + names[i] + "\n";
    CHECK(nm.out == want_names);
    const run_result c =
        gpufeed_run(dir.path(), with(with({"inspect", "--checksums"}, shards), v.inspect));
    CAPTURE(c.err);
    CHECK(c.code == 0);
    CHECK(c.err.empty());
    CHECK(c.out == want);

    const run_result j = gpufeed_run(
        dir.path(), with(with({"inspect", "--json", "--checksums"}, shards), v.inspect));
    REQUIRE(j.code == 0);
    const auto doc = nlohmann::json::parse(j.out);
    CHECK(doc["records"] == 60);
    CHECK(doc["shards"].size() == shards.size());
    CHECK(doc["shards"][0]["path"] == shards[0]);
    const bool h5 = std::string(v.name).rfind("hdf5", 0) == 0;
    CHECK(doc["shards"][0]["format"] == (h5 ? "hdf5" : "lmdb"));
    if (h5) {
      CHECK(doc["shards"][0]["layout"] == "blob");
      CHECK(doc["shards"][0]["names"] == true);
      CHECK(doc["shards"][0]["labels"] == (std::string(v.name) == "hdf5-labels"));
    }
    const auto& sums = doc["checksums"];
    REQUIRE(sums.size() == 60);
    std::string from_json;
    for (const auto& e : sums)
      from_json += std::to_string(e["index"].get<int>()) + " " +
                   std::to_string(e["size"].get<int>()) + " " + e["crc32"].get<std::string>() +
                   "\n";
    CHECK(from_json == want);
    if (v.name == variants.front().name || v.name == variants.back().name) {
      const run_result t = gpufeed_run(dir.path(), with(with({"inspect"}, shards), v.inspect));
      CHECK(t.code == 0);
      if (v.name == variants.back().name)
        CHECK(t.out.find("values     datum") != std::string::npos);
      CHECK(t.out.find("total: " + std::to_string(shards.size()) + " shards, 60 records") !=
            std::string::npos);
    }
  }
  // --quiet: nothing on stdout or stderr.
  const run_result q =
      gpufeed_run(dir.path(), {"pack", root.string(), "-o", (dir / "quiet").string(), "--quiet"});
  CHECK(q.code == 0);
  CHECK(q.out.empty());
  CHECK(q.err.empty());
}

TEST_CASE("inspect: bad input exits 1 with one line naming the file") {
  gpufeed::test::temp_dir dir("clibad");
  const fs::path root = dir / "in";
  gpufeed::test::make_tree(root, 20, 3000, 2, 22);
  write_text(root / "c0/zz_not_a_datum", std::string("\x22\x10", 2));  // data field, truncated
  REQUIRE(
      gpufeed_run(dir.path(), {"pack", root.string(), "-o", (dir / "h5").string(), "-q"}).code ==
      0);
  REQUIRE(gpufeed_run(dir.path(), {"pack", root.string(), "-o", (dir / "mdb").string(), "-q",
                                   "--format", "lmdb"})
              .code == 0);
  REQUIRE(gpufeed_run(dir.path(),
                      {"pack", root.string(), "-o", (dir / "z").string(), "-q", "--deflate", "5"})
              .code == 0);
  const std::string h5 = (dir / "h5/shard-00000.h5").string();
  const std::string mdb = (dir / "mdb/shard-00000.lmdb").string();

  const std::string junk = (dir / "junk.bin").string();
  write_file(junk, gpufeed::test::random_bytes(5000, 1));
  expect_one_line_failure(gpufeed_run(dir.path(), {"inspect", junk}), junk, "neither an HDF5 file");
  const std::string missing = (dir / "missing.h5").string();
  expect_one_line_failure(gpufeed_run(dir.path(), {"inspect", missing}), missing);
  expect_one_line_failure(gpufeed_run(dir.path(), {"inspect", root.string()}), root.string(),
                          "data.mdb");

  const std::string truncated = (dir / "truncated.h5").string();
  bytes b = gpufeed::test::read_file(h5);
  b.resize(b.size() / 2);
  write_file(truncated, b);
  expect_one_line_failure(gpufeed_run(dir.path(), {"inspect", truncated}), truncated);
  expect_one_line_failure(gpufeed_run(dir.path(), {"inspect", "--checksums", truncated}),
                          truncated);

  expect_one_line_failure(gpufeed_run(dir.path(), {"inspect", "--dataset", "nope", h5}), h5,
                          "nope");
  expect_one_line_failure(gpufeed_run(dir.path(), {"inspect", "--datum", h5}), h5);

  // A deflate chunk damaged in its middle: corrupt_error when the record is read.
  const std::string z = (dir / "z/shard-00000.h5").string();
  const auto [addr, size] = gpufeed::test::chunk_extent(z, "data", {0});
  gpufeed::test::flip_byte(z, addr + size / 2, 0xff);
  // The shard is small: pack's manifest fingerprint covers the byte, and says so at open.
  expect_one_line_failure(gpufeed_run(dir.path(), {"inspect", "--checksums", z}), z,
                          "not the file the manifest lists");
  fs::remove(dir / "z/manifest.json");
  const run_result cz = gpufeed_run(dir.path(), {"inspect", "--checksums", z});
  expect_one_line_failure(cz, z, "record");

  // fletcher32 over raw chunks: a flipped data byte fails the checksum.
  const std::string fl = (dir / "fletcher.h5").string();
  {
    gpufeed::test::h5_file f(fl);
    gpufeed::test::dataset_spec s;
    s.dims = {64, 100};
    s.chunk = {8, 100};
    s.fletcher32 = true;
    f.add(s, gpufeed::test::pattern<std::uint8_t>(6400));
  }
  const auto [faddr, fsize] = gpufeed::test::chunk_extent(fl, "data", {8, 0});
  gpufeed::test::flip_byte(fl, faddr + 10);
  expect_one_line_failure(gpufeed_run(dir.path(), {"inspect", "--checksums", fl}), fl, "record 8");

  // Blob offsets that decrease; a dataset of strings (unsupported dtype).
  const std::string off = (dir / "offsets.h5").string();
  {
    gpufeed::test::h5_file f(off);
    gpufeed::test::dataset_spec d;
    d.dims = {100};
    f.add(d, gpufeed::test::pattern<std::uint8_t>(100));
    f.add_offsets({0, 50, 20, 100}, H5T_NATIVE_UINT64);
  }
  expect_one_line_failure(gpufeed_run(dir.path(), {"inspect", off}), off, "offsets");
  const std::string str = (dir / "strings.h5").string();
  {
    gpufeed::test::h5_file f(str);
    gpufeed::test::h5_id t(H5Tcopy(H5T_C_S1), H5Tclose, "H5Tcopy");
    H5Tset_size(t, 4);
    gpufeed::test::dataset_spec d;
    d.file_type = d.mem_type = t;
    d.dims = {3};
    f.add_raw(d, "abcdefghijkl");
  }
  expect_one_line_failure(gpufeed_run(dir.path(), {"inspect", str}), str);

  // LMDB: a value that is not a Datum; a truncated data.mdb.
  const run_result nd = gpufeed_run(dir.path(), {"inspect", "--datum", mdb});
  expect_one_line_failure(nd, mdb + "/data.mdb", "not a Caffe Datum");
  const fs::path cut = dir / "cut.lmdb";
  fs::create_directories(cut);
  bytes m = gpufeed::test::read_file(fs::path(mdb) / "data.mdb");
  m.resize(m.size() / 2);
  write_file(cut / "data.mdb", m);
  expect_one_line_failure(gpufeed_run(dir.path(), {"inspect", cut.string()}),
                          (cut / "data.mdb").string());
}

TEST_CASE("pack: failures exit 1 with one line; usage errors exit 2") {
  gpufeed::test::temp_dir dir("clipack");
  write_file(dir / "in/a", gpufeed::test::random_bytes(10, 1));
  const std::string list = (dir / "list.txt").string();
  write_text(list, "in/a\nin/missing\n");
  const std::string out = (dir / "out").string();
  expect_one_line_failure(gpufeed_run(dir.path(), {"pack", "--list", list, "-o", out}),
                          (dir / "in/missing").string(), "cannot read input file");
  write_text(list, "in/a\t1\n");
  REQUIRE(gpufeed_run(dir.path(), {"pack", "--list", list, "-o", out, "-q"}).code == 0);
  expect_one_line_failure(gpufeed_run(dir.path(), {"pack", "--list", list, "-o", out}), out,
                          "not empty");
  CHECK(gpufeed_run(dir.path(), {"pack", "--list", list, "-o", out, "-q", "--force"}).code == 0);
  expect_one_line_failure(
      gpufeed_run(dir.path(), {"pack", (dir / "in").string(), "-o", (dir / "o2").string(),
                               "--format", "lmdb", "--deflate", "3"}),
      "", "deflate");

  // An output directory inside the input is refused before anything is listed or written.
  expect_one_line_failure(gpufeed_run(dir.path(), {"pack", (dir / "in").string(), "-o",
                                                   (dir / "in/out").string(), "--force"}),
                          (dir / "in/out").string(), "lies inside the input directory");
  CHECK(!fs::exists(dir / "in/out"));

  // Usage errors (missing or invalid arguments) exit 2, as main() maps CLI11's parse errors.
  constexpr int usage = 2;
  CHECK(gpufeed_run(dir.path(), {"pack", (dir / "in").string()}).code == usage);
  CHECK(gpufeed_run(dir.path(), {"pack", "-o", out}).code == usage);
  CHECK(gpufeed_run(dir.path(), {"inspect"}).code == usage);
  CHECK(
      gpufeed_run(dir.path(), {"pack", (dir / "in").string(), "-o", out, "--deflate", "12"}).code ==
      usage);
}

TEST_CASE("inspect: HDF5 files pack did not write (fixed rows, H5Dread fallback)") {
  gpufeed::test::temp_dir dir("cliforeign");
  const std::string compact = (dir / "compact.h5").string();
  const auto rows = gpufeed::test::pattern<std::int16_t>(6 * 10);
  {
    gpufeed::test::h5_file f(compact);
    gpufeed::test::dataset_spec s;
    s.file_type = s.mem_type = H5T_NATIVE_INT16;
    s.dims = {6, 10};
    s.compact = true;
    f.add(s, rows);
  }
  const run_result t = gpufeed_run(dir.path(), {"inspect", "--json", compact});
  CAPTURE(t.err);
  REQUIRE(t.code == 0);
  const auto doc = nlohmann::json::parse(t.out);
  CHECK(doc["shards"][0]["layout"] == "fixed");
  CHECK(doc["shards"][0]["storage"] == "compact");
  CHECK(doc["shards"][0]["read_path"] == "h5dread_fallback");
  CHECK(doc["shards"][0]["names"] == false);
  CHECK(doc["shards"][0]["labels"] == false);
  std::string want;
  for (std::size_t r = 0; r < 6; ++r) {
    const auto* p = reinterpret_cast<const std::byte*>(rows.data() + r * 10);
    char line[64];
    std::snprintf(line, sizeof line, "%zu 20 %08x\n", r,
                  static_cast<unsigned>(gpufeed::test::crc_of(bytes(p, p + 20))));
    want += line;
  }
  const run_result c = gpufeed_run(dir.path(), {"inspect", "--checksums", compact, compact});
  REQUIRE(c.code == 0);
  std::string twice = want;
  for (std::size_t r = 0; r < 6; ++r) {  // the second copy continues the global index
    const auto* p = reinterpret_cast<const std::byte*>(rows.data() + r * 10);
    char line[64];
    std::snprintf(line, sizeof line, "%zu 20 %08x\n", r + 6,
                  static_cast<unsigned>(gpufeed::test::crc_of(bytes(p, p + 20))));
    twice += line;
  }
  CHECK(c.out == twice);
}

TEST_CASE("pack: a FIFO in the input is skipped with one note; no input names the directory") {
  gpufeed::test::temp_dir dir("clififo");
  write_file(dir / "in/a/x.bin", gpufeed::test::random_bytes(100, 1));
  REQUIRE(::mkfifo((dir / "in/a/pipe").c_str(), 0600) == 0);
  REQUIRE(::mkfifo((dir / "in/a/pipe2").c_str(), 0600) == 0);
  const run_result r = gpufeed_run(dir.path(), {"pack", (dir / "in").string(), "-o",
                                                (dir / "out").string(), "--no-shuffle"});
  CAPTURE(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("packed 1 files") != std::string::npos);
  CHECK(r.err.find("skipped 2 entries") != std::string::npos);
  CHECK(r.err.find("'a/pipe' first") != std::string::npos);
  CHECK(r.err.find("not regular files") != std::string::npos);
  // Only FIFOs: the error names the directory once, and says "pack" once.
  fs::remove(dir / "in/a/x.bin");
  const run_result e = gpufeed_run(dir.path(), {"pack", (dir / "in").string(), "-o",
                                                (dir / "out2").string(), "-q"});
  expect_one_line_failure(e, (dir / "in").string(), "no input files");
  CHECK(e.err.find("pack: pack:") == std::string::npos);
  CHECK(e.err.find("error: pack:") == std::string::npos);
  CHECK(e.err.find("only entries that are not regular files") != std::string::npos);
}

TEST_CASE("pack --from: an h5py gzip file with automatic chunks, --labels NAME, --verify") {
  gpufeed::test::temp_dir dir("clifrom");
  const fs::path file = dir / "users.h5";
  const std::string make = std::string(GPUFEED_TEST_PYTHON) + " " + GPUFEED_H5PY_CHECK +
                           " make-gzip '" + file.string() + "' 300 500";
  const int rc = std::system(make.c_str());
  if (WIFEXITED(rc) && WEXITSTATUS(rc) == 77) return;  // no h5py: said by the script
  REQUIRE(rc == 0);
  const fs::path out = dir / "out";
  const run_result r =
      gpufeed_run(dir.path(), {"pack", "--from", file.string(), "--dataset", "data", "--labels",
                               "labels", "-o", out.string(), "--compress", "lz4", "--verify"});
  CAPTURE(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("packed 300 rows") != std::string::npos);
  CHECK(r.err.find("verify 300/300") != std::string::npos);  // progress on stderr
  const run_result src = gpufeed_run(dir.path(), {"inspect", "--checksums", file.string()});
  const run_result got =
      gpufeed_run(dir.path(), with({"inspect", "--checksums"}, shards_in(out)));
  REQUIRE(src.code == 0);
  CHECK(got.out == src.out);
  const run_result j = gpufeed_run(dir.path(), with({"inspect", "--json"}, shards_in(out)));
  const auto doc = nlohmann::json::parse(j.out);
  CHECK(doc["shards"][0]["layout"] == "fixed");
  CHECK(doc["shards"][0]["labels"] == true);
  CHECK(doc["shards"][0]["filters"][0] == "lz4");
  expect_one_line_failure(
      gpufeed_run(dir.path(), {"pack", "--from", file.string(), "--dataset", "nope", "-o",
                               (dir / "o2").string()}),
      file.string());
}

TEST_CASE("inspect --verify: a flipped record byte is caught (the open-time fingerprint misses it)") {
  gpufeed::test::temp_dir dir("cliverify");
  const fs::path root = dir / "in";
  gpufeed::test::make_tree(root, 40, 24000, 2, 31);  // ~400 KB: a shard well over 128 KiB
  REQUIRE(gpufeed_run(dir.path(), {"pack", root.string(), "-o", (dir / "h5").string(), "-q",
                                   "--no-shuffle"})
              .code == 0);
  const std::string h5 = (dir / "h5/shard-00000.h5").string();
  const run_result ok = gpufeed_run(dir.path(), {"inspect", "--verify", h5});
  CAPTURE(ok.err);
  REQUIRE(ok.code == 0);
  CHECK(ok.out.find("verified") != std::string::npos);
  // Flip a byte in the middle, away from both ends (outside the fingerprint): record bytes
  // (the records are nearly all of the file).
  bytes b = gpufeed::test::read_file(h5);
  REQUIRE(b.size() > (300u << 10));
  const std::size_t at = b.size() / 2;
  b[at] ^= std::byte{0x40};
  write_file(h5, b);
  CHECK(gpufeed_run(dir.path(), {"inspect", h5}).code == 0);  // size and fingerprint still agree
  expect_one_line_failure(gpufeed_run(dir.path(), {"inspect", "--verify", h5}), h5,
                          "records differ from what");
  // A shard no manifest lists: --verify has nothing to check it against.
  const std::string lone = (dir / "lone.h5").string();
  fs::copy_file(h5, lone);
  expect_one_line_failure(gpufeed_run(dir.path(), {"inspect", "--verify", lone}), lone,
                          "--verify");
}
