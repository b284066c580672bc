// What a source believes of pack's manifest.json, and what it checks: a shard's identity (size
// and fingerprint) when it is first opened, so shards swapped on disk are a format_error naming
// the shard, never records in the wrong order; `records: 0` for a non-empty shard; counts and
// sizes no shard file can hold (a typed error naming the manifest and field, before anything is
// allocated by them); an older manifest without the identity fields still opens.
#include <doctest/doctest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "expect_error.hpp"
#include "gpufeed/hdf5_source.hpp"
#include "gpufeed/lmdb_source.hpp"
#include "gpufeed/pack/pack.hpp"
#include "pack_test_util.hpp"
#include "test_util.hpp"

using namespace gpufeed;
namespace fs = std::filesystem;

namespace {

// 6 records of 1,000 bytes, input order kept, 2 per shard: 3 shards with equal counts.
std::vector<fs::path> pack_three(const fs::path& dir, shard_format format) {
  std::vector<pack_input> in;
  for (int i = 0; i < 6; ++i) {
    const fs::path p = dir / "in" / ("f" + std::to_string(i));
    test::write_file(p, test::random_bytes(1000, static_cast<std::uint32_t>(i)));
    in.push_back({p, p.filename().string(), std::nullopt});
  }
  pack_options o;
  o.format = format;
  o.shard_bytes = 2000;
  o.shuffle = false;
  const pack_result r = pack(in, dir / "out", o);
  std::vector<fs::path> paths;
  for (const auto& s : r.shard_info) paths.push_back(s.file);
  REQUIRE(paths.size() == 3);
  return paths;
}

std::string read_all(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The manifest beside the shards with `from` replaced by `to` (a regex) in shard `name`'s entry.
void edit_entry(const fs::path& dir, const std::string& name, const std::string& from,
                const std::string& to) {
  const fs::path m = dir / "manifest.json";
  std::string t = read_all(m);
  const std::size_t at = t.find("{\"file\": \"" + name + "\"");
  REQUIRE(at != std::string::npos);
  const std::size_t end = t.find('}', at);
  const std::string entry = t.substr(at, end - at);
  const std::string edited = std::regex_replace(entry, std::regex(from), to);
  REQUIRE(edited != entry);
  t.replace(at, end - at, edited);
  std::ofstream(m, std::ios::trunc) << t;
}

template <class Source>
Source open_source(const std::vector<fs::path>& paths) {
  return Source(paths);
}

template <class Source>
void read_record(const Source& s, std::uint64_t i) {
  std::vector<std::byte> buf(s.max_record_size());
  s.read(i, std::span<std::byte>(buf.data(), s.record_size(i)));
}

template <class Source>
void check_format(shard_format format) {
  test::temp_dir dir("mcheck");
  SUBCASE("swapped shards (equal counts): format_error naming the shard at first use") {
    const auto paths = pack_three(dir.path(), format);
    fs::rename(paths[1], dir / "tmp");
    fs::rename(paths[2], paths[1]);
    fs::rename(dir / "tmp", paths[2]);
    const Source src = open_source<Source>(paths);  // shard 0 is intact; 1 and 2 open lazily
    read_record(src, 0);
    const std::string e = test::error_of<format_error>([&] { read_record(src, 2); });
    CHECK(test::has(e, "shard-00001"));
    CHECK(test::has(e, "not the file the manifest lists"));
    // Swapping the first shard: the source's construction says so.
    fs::rename(paths[0], dir / "tmp");
    fs::rename(paths[1], paths[0]);
    fs::rename(dir / "tmp", paths[1]);
    const std::string e0 = test::error_of<format_error>([&] { (void)open_source<Source>(paths); });
    CHECK(test::has(e0, "shard-00000"));
  }
  SUBCASE("an older manifest without file_bytes and fingerprint still opens and reads") {
    const auto paths = pack_three(dir.path(), format);
    for (const auto& p : paths) {
      const std::string name = p.filename().string();
      edit_entry(dir / "out", name, ", \"file_bytes\": [0-9]+", "");
      edit_entry(dir / "out", name, ", \"fingerprint\": \"[0-9a-f]+\"", "");
    }
    const Source src = open_source<Source>(paths);
    for (std::uint64_t i = 0; i < src.size(); ++i) read_record(src, i);
    CHECK(src.size() == 6);
  }
  SUBCASE("records: 0 for a non-empty shard: format_error at construction") {
    const auto paths = pack_three(dir.path(), format);
    edit_entry(dir / "out", "shard-00001" + paths[1].extension().string(),
               "\"records\": [0-9]+", "\"records\": 0");
    const std::string e = test::error_of<format_error>([&] { (void)open_source<Source>(paths); });
    CHECK(test::has(e, "records: 0"));
  }
  SUBCASE("records: 10^12 or max_record: 2^40: format_error naming manifest and field, at once") {
    const auto paths = pack_three(dir.path(), format);
    const std::string name = "shard-00001" + paths[1].extension().string();
    const std::string m = (dir / "out" / "manifest.json").string();
    for (const auto& [field, value] :
         {std::pair<std::string, std::string>{"records", "1000000000000"},
          {"max_record", "1099511627776"},
          {"records", "99999999999999999999999999"}}) {
      CAPTURE(field);
      edit_entry(dir / "out", name, "\"" + field + "\": [0-9]+", "\"" + field + "\": " + value);
      const auto t0 = std::chrono::steady_clock::now();
      const std::string e =
          test::error_of<format_error>([&] { (void)open_source<Source>(paths); });
      CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10));
      CHECK(test::has(e, m));
      // A number past 2^64 - 1 reads as that (and is refused as such).
      CHECK(test::has(e, field + ": " + (value.size() > 20 ? "18446744073709551615" : value)));
      edit_entry(dir / "out", name, "\"" + field + "\": [0-9]+",
                 "\"" + field + "\": " + (field == "records" ? "2" : "1000"));
    }
    (void)open_source<Source>(paths);  // restored
  }
}

}  // namespace

TEST_CASE("manifest checks: hdf5") { check_format<hdf5_source>(shard_format::hdf5); }
TEST_CASE("manifest checks: lmdb") { check_format<lmdb_source>(shard_format::lmdb); }
