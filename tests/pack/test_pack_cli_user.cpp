// The built `gpufeed` binary as a user meets it with their own data: an interrupted pack removes
// what it wrote and an unfinished one is refused everywhere; pack directories open directly;
// an h5py-style file's datasets are listed and chosen by name (--dataset=x --labels=y).
#include <doctest/doctest.h>
#include <fcntl.h>
#include <hdf5.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "gpufeed/hdf5_source.hpp"
#include "gpufeed/lmdb_source.hpp"
#include "h5_writer.hpp"
#include "pack_test_util.hpp"
#include "test_util.hpp"

namespace fs = std::filesystem;
using gpufeed::test::read_text;

namespace {

struct run_result {
  int code = -1;
  std::string out, err;
};

// Starts gpufeed with args, stdout and stderr to files in dir; returns its pid.
pid_t spawn(const fs::path& dir, const std::vector<std::string>& args) {
  const std::string out = (dir / "stdout.txt").string(), err = (dir / "stderr.txt").string();
  std::vector<std::string> all = {GPUFEED_CLI_PATH};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    const int o = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int e = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int in = ::open("/dev/null", O_RDONLY);
    if (o < 0 || e < 0 || in < 0) ::_exit(126);
    ::dup2(o, 1);
    ::dup2(e, 2);
    ::dup2(in, 0);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  return pid;
}

run_result finish(const fs::path& dir, pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
  }
  run_result r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = read_text(dir / "stdout.txt");
  r.err = read_text(dir / "stderr.txt");
  return r;
}

run_result gpufeed_run(const fs::path& dir, const std::vector<std::string>& args) {
  return finish(dir, spawn(dir, args));
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Waits (up to 20 s) until `file` exists; false when the process ended first.
bool wait_for(const fs::path& file, pid_t pid) {
  const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < limit) {
    if (fs::exists(file)) return true;
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
  return false;
}

std::vector<std::string> entries(const fs::path& dir) {
  std::vector<std::string> v;
  for (const auto& e : fs::directory_iterator(dir)) v.push_back(e.path().filename().string());
  return v;
}

// 48 MiB in 192 files of 256 KiB: packs for long enough to be interrupted after its first 2 MiB
// shard.
void make_big_tree(const fs::path& root) {
  for (int i = 0; i < 192; ++i)
    gpufeed::test::write_file(root / ("c" + std::to_string(i % 2)) / ("f" + std::to_string(i)),
                              gpufeed::test::random_bytes(256 << 10, static_cast<std::uint32_t>(i)));
}

// An h5py-like file: "x" float32 [n, 8] chunked and deflated, "y" int64 [n] labels.
void make_user_file(const fs::path& path, std::size_t n) {
  std::vector<float> x(n * 8);
  std::vector<std::int64_t> y(n);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i);
  for (std::size_t i = 0; i < n; ++i) y[i] = static_cast<std::int64_t>(i % 10) + 100;
  gpufeed::test::h5_file f(path);
  gpufeed::test::dataset_spec xs;
  xs.name = "x";
  xs.file_type = H5T_IEEE_F32LE;
  xs.mem_type = H5T_NATIVE_FLOAT;
  xs.dims = {n, 8};
  xs.chunk = {64, 8};
  xs.deflate = 4;
  f.add(xs, x);
  gpufeed::test::dataset_spec ys;
  ys.name = "y";
  ys.file_type = H5T_STD_I64LE;
  ys.mem_type = H5T_NATIVE_INT64;
  ys.dims = {n};
  f.add(ys, y);
  gpufeed::test::dataset_spec other;  // a dataset called "labels" the user never asked for
  other.name = "labels";
  other.file_type = H5T_STD_I64LE;
  other.mem_type = H5T_NATIVE_INT64;
  other.dims = {n};
  f.add(other, std::vector<std::int64_t>(n, -1));
}

}  // namespace

TEST_CASE("SIGINT or SIGTERM mid-pack removes what pack wrote, says so, exits 130 / 143") {
  gpufeed::test::temp_dir dir("interrupt");
  make_big_tree(dir / "in");
  struct kind {
    const char* format;
    int sig;
    const char* first;
  };
  for (const kind k : {kind{"hdf5", SIGINT, "shard-00000.h5"},
                       kind{"lmdb", SIGTERM, "shard-00000.lmdb"}}) {
    CAPTURE(k.format);
    const fs::path out = dir / (std::string("out-") + k.format);
    const pid_t pid = spawn(dir.path(), {"pack", (dir / "in").string(), "-o", out.string(),
                                         "--format", k.format, "--shard-size", "2MiB",
                                         "--threads", "1"});
    const bool seen = wait_for(out / k.first, pid);
    if (seen) ::kill(pid, k.sig);
    const run_result r = finish(dir.path(), pid);
    CAPTURE(r.err);
    REQUIRE_MESSAGE(seen, "the pack ended before its first shard was seen");
    CHECK(r.code == 128 + k.sig);
    CHECK(has(r.err, "interrupted"));
    CHECK(has(r.err, "removed"));
    CHECK(has(r.err, k.sig == SIGINT ? "SIGINT" : "SIGTERM"));
    CHECK(entries(out).empty());  // no shard, no hidden temporary, no manifest
    // Every tool on the directory: nothing to read, and nothing that looks like a dataset.
    const run_result b = gpufeed_run(dir.path(), {"bench", out.string(), "--seconds", "1"});
    CHECK(b.code == 1);
    CHECK(has(b.err, "no HDF5 or LMDB shards"));
    const run_result i = gpufeed_run(dir.path(), {"inspect", out.string()});
    CHECK(i.code == 1);
    // The same directory takes a new pack without --force.
    const run_result again = gpufeed_run(
        dir.path(), {"pack", (dir / "in").string(), "-o", out.string(), "--format", k.format,
                     "--quiet"});
    CHECK(again.code == 0);
  }
}

TEST_CASE("a pack that did not finish is refused by inspect, bench, doctor and the sources") {
  gpufeed::test::temp_dir dir("unfinished");
  make_big_tree(dir / "in");
  const fs::path out = dir / "out";
  // SIGKILL: nothing can clean up, as after a crash or power loss.
  const pid_t pid = spawn(dir.path(), {"pack", (dir / "in").string(), "-o", out.string(),
                                       "--shard-size", "2MiB", "--threads", "1"});
  const bool seen = wait_for(out / "shard-00000.h5", pid);
  if (seen) ::kill(pid, SIGKILL);
  (void)finish(dir.path(), pid);
  REQUIRE(seen);
  REQUIRE_FALSE(fs::exists(out / "manifest.json"));
  const std::string said = "did not finish";
  const run_result i = gpufeed_run(dir.path(), {"inspect", out.string()});
  CAPTURE(i.err);
  CHECK(i.code == 1);
  CHECK(has(i.err, said));
  const run_result b = gpufeed_run(dir.path(), {"bench", out.string(), "--seconds", "1"});
  CAPTURE(b.err);
  CHECK(b.code == 1);
  CHECK(has(b.err, said));
  const run_result d = gpufeed_run(dir.path(), {"doctor", "--data", out.string()});
  CAPTURE(d.out);
  CHECK(d.code == 1);
  CHECK(has(d.out, said));
  CHECK_THROWS_WITH_AS(gpufeed::hdf5_source{out}, doctest::Contains("did not finish"), gpufeed::format_error);
  // A rerun without --force says what is there.
  const run_result p = gpufeed_run(dir.path(), {"pack", (dir / "in").string(), "-o", out.string()});
  CHECK(p.code == 1);
  CHECK(has(p.err, "not empty"));

  // Only hidden leftovers (ls shows nothing): named, and said to be pack's.
  const fs::path hidden = dir / "hidden";
  gpufeed::test::write_text(hidden / ".shard-00003.h5.tmp", "x");
  const run_result h = gpufeed_run(dir.path(), {"pack", (dir / "in").string(), "-o", hidden.string()});
  CAPTURE(h.err);
  CHECK(h.code == 1);
  CHECK(has(h.err, ".shard-00003.h5.tmp"));
  CHECK(has(h.err, "interrupted or failed pack"));
  CHECK(has(h.err, "--force"));
  CHECK_THROWS_WITH_AS(gpufeed::lmdb_source{hidden}, doctest::Contains("did not finish"), gpufeed::format_error);
}

TEST_CASE("sources and inspect open a pack directory, its manifest.json and DB/data.mdb") {
  gpufeed::test::temp_dir dir("packdir");
  gpufeed::test::make_tree(dir / "in", 30, 3000, 3, 5);
  const fs::path h5 = dir / "h5", mdb = dir / "mdb";
  REQUIRE(gpufeed_run(dir.path(), {"pack", (dir / "in").string(), "-o", h5.string(),
                                   "--shard-size", "20KB", "--quiet"})
              .code == 0);
  REQUIRE(gpufeed_run(dir.path(), {"pack", (dir / "in").string(), "-o", mdb.string(),
                                   "--shard-size", "20KB", "--format", "lmdb", "--quiet"})
              .code == 0);
  REQUIRE(entries(h5).size() > 2);  // several shards and the manifest
  const gpufeed::hdf5_source a(h5), b(h5 / "manifest.json");
  CHECK(a.size() == 30);
  CHECK(b.size() == 30);
  const auto records = gpufeed::test::read_all_records(a);
  const gpufeed::lmdb_source l(mdb);
  CHECK(l.size() == 30);
  CHECK(gpufeed::test::read_all_records(l) == records);  // same seed: the same order
  CHECK_THROWS_AS(gpufeed::hdf5_source{mdb}, gpufeed::format_error);  // an LMDB pack

  const run_result all = gpufeed_run(dir.path(), {"inspect", "--checksums", h5.string()});
  CHECK(all.code == 0);
  CHECK(std::count(all.out.begin(), all.out.end(), '\n') == 30);
  const run_result m = gpufeed_run(dir.path(), {"inspect", "--checksums", mdb.string()});
  CHECK(m.out == all.out);
  const run_result t = gpufeed_run(dir.path(), {"inspect", "--json", h5.string()});
  REQUIRE(t.code == 0);
  const auto doc = nlohmann::json::parse(t.out);
  CHECK(doc["records"] == 30);
  CHECK(doc["disk_bytes"].get<std::uint64_t>() > doc["bytes"].get<std::uint64_t>());  // HDF5 metadata
  CHECK(doc["compression_ratio"].get<double>() > 0);
  const run_result one =
      gpufeed_run(dir.path(), {"inspect", (mdb / "shard-00000.lmdb" / "data.mdb").string()});
  CAPTURE(one.err);
  CHECK(one.code == 0);
  CHECK(has(one.out, "LMDB"));
  CHECK(has(one.out, "on disk"));
}

TEST_CASE("a user's h5py file: datasets listed, chosen by name, --labels=y packs y") {
  gpufeed::test::temp_dir dir("userfile");
  const fs::path file = dir / "features.h5";
  make_user_file(file, 1000);
  // inspect with no dataset named lists them with shapes, dtypes, chunks and filters.
  const run_result i = gpufeed_run(dir.path(), {"inspect", file.string()});
  CAPTURE(i.err);
  CHECK(i.code == 0);
  CHECK(has(i.out, "x "));
  CHECK(has(i.out, "float32"));
  CHECK(has(i.out, "[1000, 8]"));
  CHECK(has(i.out, "chunks [64, 8]"));
  CHECK(has(i.out, "deflate"));
  CHECK(has(i.out, "--dataset"));
  // A missing dataset names those present and the option, in the library and every command.
  CHECK_THROWS_WITH_AS(gpufeed::hdf5_source{file}, doctest::Contains("x (1000 x 8 float32)"),
                       gpufeed::format_error);
  CHECK_THROWS_WITH_AS(gpufeed::hdf5_source{file}, doctest::Contains("hdf5_options::dataset"),
                       gpufeed::format_error);
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"bench", file.string(), "--seconds", "1"},
           {"inspect", file.string(), "--dataset", "data"},
           {"pack", "--from", file.string(), "-o", (dir / "p0").string()}}) {
    const run_result r = gpufeed_run(dir.path(), args);
    CAPTURE(args.front());
    CAPTURE(r.err);
    CHECK(r.code == 1);
    CHECK(has(r.err, "x (1000 x 8 float32)"));
    CHECK(has(r.err, "--dataset"));
  }
  // Forgetting --from.
  const run_result f = gpufeed_run(dir.path(), {"pack", file.string(), "-o", (dir / "p1").string()});
  CHECK(f.code == 1);
  CHECK(has(f.err, "--from"));
  // --labels=y packs y (not the "labels" dataset the user never named), as --labels y does.
  for (const auto& form : std::vector<std::vector<std::string>>{{"--labels=y"}, {"--labels", "y"}}) {
    const fs::path out = dir / ("p" + std::to_string(form.size() + 1));
    std::vector<std::string> args = {"pack", "--from", file.string(), "--dataset=x",
                                     "-o", out.string(), "--compress", "lz4"};
    args.insert(args.end(), form.begin(), form.end());
    const run_result p = gpufeed_run(dir.path(), args);
    CAPTURE(p.err);
    REQUIRE(p.code == 0);
    CHECK(has(p.out, "packed 1000 rows"));
    CHECK(has(p.out, "on disk"));
    CHECK(has(p.err, "rows"));  // progress counts rows
    CHECK_FALSE(has(p.err, "files"));
    const gpufeed::hdf5_source s(out);
    REQUIRE(s.size() == 1000);
    CHECK(s.label(0) == 100);
    CHECK(s.label(7) == 107);
  }
  // bench runs the order the data suits, and says which, and takes --dataset / --labels.
  const run_result b = gpufeed_run(dir.path(), {"bench", file.string(), "--dataset=x",
                                                "--labels", "y", "--seconds", "1",
                                                "--workers", "1", "--prefetch", "2"});
  CAPTURE(b.err);
  CHECK(b.code == 0);
  CHECK(has(b.out, "order block_shuffled"));
  CHECK(has(b.out, "auto: a decode unit holds 64 records"));
  CHECK(has(b.out, "dataset 'x', labels 'y'"));
  // Asked for shuffled: the notice once, in the report, not once per sweep row on stderr.
  const run_result sh = gpufeed_run(dir.path(), {"bench", file.string(), "--dataset", "x",
                                                 "--order=shuffled", "--seconds", "1",
                                                 "--workers", "1", "--prefetch", "2,4"});
  CHECK(sh.code == 0);
  CHECK(has(sh.out, "order shuffled"));
  CHECK(std::count(sh.out.begin(), sh.out.end(), '~') == 1);
  CHECK_FALSE(has(sh.err, "decodes its whole unit"));
  // doctor --data: the order that ran is stated; a run that decoded each chunk once per record
  // is not a plain PASS.
  const auto loader_check = [&](const std::string& order) {
    const run_result d = gpufeed_run(
        dir.path(), {"doctor", "--data", file.string(), "--dataset=x", "--labels=y",
                     "--order=" + order, "--loader-seconds", "0.5", "--json"});
    CAPTURE(d.err);
    const auto doc = nlohmann::json::parse(d.out);
    for (const auto& c : doc["checks"])
      if (c["id"] == "loader") return c;
    FAIL("no loader check");
    return nlohmann::json();
  };
  const auto slow = loader_check("shuffled");
  CAPTURE(slow.dump());
  CHECK(slow["status"] == "warn");
  CHECK(has(slow["summary"].get<std::string>(), "in shuffled order"));
  CHECK(has(slow["summary"].get<std::string>(), "the order does not suit the data"));
  const auto suited = loader_check("auto");
  CAPTURE(suited.dump());
  CHECK(suited["status"] == "pass");
  CHECK(has(suited["facts"]["order"].get<std::string>(), "block_shuffled (auto:"));
}

TEST_CASE("pack: --compress lz5 is a usage error; folder packs skip hidden files, take globs") {
  gpufeed::test::temp_dir dir("packopts");
  const run_result c = gpufeed_run(dir.path(), {"pack", dir.path().string(), "-o",
                                                (dir / "o").string(), "--compress", "lz5"});
  CHECK(c.code == 2);
  CHECK(has(c.err, "lz5"));
  const run_result help = gpufeed_run(dir.path(), {"pack", "--help"});
  CHECK(has(help.out, "shuffled"));
  CHECK(has(help.out, "gzip is deflate:4"));
  const fs::path in = dir / "in";
  gpufeed::test::write_text(in / "a" / "1.jpg", "one");
  gpufeed::test::write_text(in / "a" / ".DS_Store", "mac");
  gpufeed::test::write_text(in / ".hidden" / "2.jpg", "hidden class");
  gpufeed::test::write_text(in / "b" / "3.jpg", "three");
  gpufeed::test::write_text(in / "b" / "labels.csv", "csv");
  const run_result p = gpufeed_run(dir.path(), {"pack", in.string(), "-o", (dir / "o").string(),
                                                "--labels", "--exclude", "*.csv", "--no-shuffle"});
  CAPTURE(p.err);
  REQUIRE(p.code == 0);
  const auto m = nlohmann::json::parse(read_text(dir / "o" / "manifest.json"));
  CHECK(m["names"] == nlohmann::json({"a/1.jpg", "b/3.jpg"}));
  CHECK(m["labels"] == nlohmann::json({{"a", 0}, {"b", 1}}));
  const run_result inc = gpufeed_run(dir.path(), {"pack", in.string(), "-o", (dir / "o2").string(),
                                                  "--include=*3.jpg", "--no-shuffle"});
  REQUIRE(inc.code == 0);
  CHECK(nlohmann::json::parse(read_text(dir / "o2" / "manifest.json"))["names"] ==
        nlohmann::json({"b/3.jpg"}));
}
