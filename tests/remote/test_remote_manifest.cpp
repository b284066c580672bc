// A pack's manifest.json named by a URL stands for the shards it lists, named by URLs beside it
// (detail/hdf5/manifest_url.hpp): hdf5_source over the manifest's URL reads the same records as
// the local pack directory, its remote counters (hdf5_source::remote_stats) count the
// requests and bytes; a manifest of LMDB shards, one that is not a manifest, and one that is not
// there are typed errors naming the URL. nginx serves the files the test writes; skips without it.
#include <doctest/doctest.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "../hdf5/h5_writer.hpp"
#include "../hdf5/hdf5_test_util.hpp"
#include "expect_error.hpp"
#include "gpufeed/detail/hdf5/manifest_url.hpp"
#include "gpufeed/error.hpp"
#include "gpufeed/hdf5_source.hpp"
#include "test_servers.hpp"
#include "test_skip.hpp"
#include "test_util.hpp"
#include "watchdog.hpp"

using namespace gpufeed;
using gpufeed::test::dataset_spec;
using gpufeed::test::error_of;
using gpufeed::test::h5_file;
using gpufeed::test::has;
using gpufeed::test::nginx_server;
using gpufeed::test::temp_dir;
using gpufeed::test::watchdog;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace {

constexpr std::size_t row = 500;

void write_shard(const fs::path& p, std::uint64_t rows, unsigned seed) {
  h5_file f(p);
  dataset_spec s;
  s.dims = {rows, row};
  s.chunk = {40, row};
  s.deflate = 4;
  f.add(s, gpufeed::test::pattern<std::uint8_t>(rows * row, seed));
}

void write_text(const fs::path& p, const std::string& text) {
  std::ofstream(p, std::ios::trunc) << text;
}

// A pack directory of two shards (written in reverse name order, so record order is the
// manifest's, not the names'), a manifest of LMDB shards, and a file that is no manifest.
struct served {
  temp_dir root{"manifestwww"};
  nginx_server nginx;
  served() : nginx((setup(root.path()), root.path())) {}
  static void setup(const fs::path& r) {
    fs::create_directories(r / "pack");
    write_shard(r / "pack/shard-00001.h5", 120, 1);
    write_shard(r / "pack/shard-00000.h5", 200, 2);
    write_text(r / "pack/manifest.json",
               "{\n  \"kind\": \"gpufeed pack manifest\",\n  \"format\": \"hdf5\",\n"
               "  \"shards\": [\n    {\"file\": \"shard-00001.h5\", \"records\": 120, "
               "\"max_record\": 500},\n    {\"file\": \"shard-00000.h5\", \"records\": 200, "
               "\"max_record\": 500}\n  ]\n}\n");
    fs::create_directories(r / "lmdb");
    write_text(r / "lmdb/manifest.json",
               "{\n  \"kind\": \"gpufeed pack manifest\",\n  \"format\": \"lmdb\",\n"
               "  \"shards\": [\n    {\"file\": \"shard-00000.lmdb\", \"records\": 3, "
               "\"max_record\": 9}\n  ]\n}\n");
    fs::create_directories(r / "other");
    write_text(r / "other/manifest.json", "{\"kind\": \"something else\"}\n");
  }
};

}  // namespace

TEST_CASE("manifest URLs: which strings are, and the URLs of the shards beside them") {
  using detail::hdf5::is_manifest_url;
  using detail::hdf5::url_beside;
  CHECK(is_manifest_url("https://h/a/manifest.json"));
  CHECK(is_manifest_url("s3://bucket/shards/manifest.json"));
  CHECK(is_manifest_url("http://h/a/manifest.json?X-Amz-Signature=x"));
  CHECK_FALSE(is_manifest_url("http://h/a/shard-00000.h5"));
  CHECK_FALSE(is_manifest_url("http://h/a/notmanifest.json"));
  CHECK_FALSE(is_manifest_url("/local/manifest.json"));
  CHECK(url_beside("https://h/a/manifest.json", "s-00000.h5") == "https://h/a/s-00000.h5");
  CHECK(url_beside("s3://b/k/manifest.json", "s-1.h5") == "s3://b/k/s-1.h5");
  // The manifest's presigned query signs the manifest alone: not carried to the shards.
  CHECK(url_beside("http://h/a/manifest.json?sig=1", "s.h5") == "http://h/a/s.h5");
}

TEST_CASE("hdf5_source over a manifest.json URL reads the pack's shards in the manifest's order") {
  served s;
  if (!s.nginx.running()) GPUFEED_SKIP_TEST(s.nginx.why_not());
  watchdog dog(60s, "manifest URL");
  const hdf5_source remote(s.nginx.url("pack/manifest.json"));
  const hdf5_source local(s.root / "pack");
  REQUIRE(remote.size() == 320);
  REQUIRE(local.size() == 320);
  CHECK(remote.file_of(0).string() == s.nginx.url("pack/shard-00001.h5"));
  CHECK(remote.file_of(319).string() == s.nginx.url("pack/shard-00000.h5"));
  std::size_t differ = 0;
  std::vector<std::byte> a(row), b(row);
  for (std::uint64_t i = 0; i < local.size(); ++i) {
    remote.read(i, a);
    local.read(i, b);
    if (a != b) ++differ;
  }
  CHECK(differ == 0);
  // The requests that read them are counted; a local source counts none.
  const remote_stats t = remote.remote_stats();
  CHECK(t.remote);
  CHECK(t.requests > 0);
  CHECK(t.bytes_fetched > 0);
  CHECK(t.failures == 0);
  std::uint64_t histogram = 0;
  for (const auto c : t.latency_us) histogram += c;
  CHECK(histogram == t.requests);
  CHECK_FALSE(local.remote_stats().remote);
  CHECK(local.remote_stats().requests == 0);
}

TEST_CASE("a manifest URL of LMDB shards, of another tool, or not there is a typed error") {
  served s;
  if (!s.nginx.running()) GPUFEED_SKIP_TEST(s.nginx.why_not());
  watchdog dog(60s, "manifest URL errors");
  const std::string lmdb = s.nginx.url("lmdb/manifest.json");
  const std::string m1 = error_of<format_error>([&] { hdf5_source src(lmdb); });
  CHECK(has(m1, lmdb));
  CHECK(has(m1, "lmdb"));
  const std::string other = s.nginx.url("other/manifest.json");
  const std::string m2 = error_of<format_error>([&] { hdf5_source src(other); });
  CHECK(has(m2, other));
  CHECK(has(m2, "not a complete gpufeed pack manifest"));
  const std::string missing = s.nginx.url("gone/manifest.json");
  const std::string m3 = error_of<io_error>([&] { hdf5_source src(missing); });
  CHECK(has(m3, missing));
  CHECK(has(m3, "404"));
}
