// hdf5_source over shards named by http:// URLs, served by nginx on the loopback interface from
// shards written locally with the HDF5 C API: every record byte-equal to the local source's
// (contiguous and chunked+deflate, fixed rows and the blob layout, shards past the first learned
// by a header read over HTTP; a shard of 2500 chunks opened in few requests), the loader in
// sequential, shuffled and block_shuffled order delivering each record once with its bytes, a
// 404 an io_error naming the URL, reads = map refused, an object replaced after open an error on
// the read that fetches from it (a unit held from before serves the version opened: never other
// bytes), and a shard replaced while closed by max_open_shards refused on
// reopen; labels read over HTTP, a shard needing the H5Dread fallback refused. s3:// URLs at a
// custom endpoint, path style: nginx (unsigned without credentials; signed with them, the signed
// headers checked here) and fault_server.py --sigv4, which checks every signature as S3 does.
// Skips when nginx is not installed.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <numeric>
#include <string>
#include <vector>

#include "../hdf5/h5_writer.hpp"
#include "../hdf5/hdf5_test_util.hpp"
#include "env_guard.hpp"
#include "expect_error.hpp"
#include "gpufeed/detail/remote/object_source.hpp"
#include "gpufeed/error.hpp"
#include "gpufeed/hdf5_source.hpp"
#include "gpufeed/loader.hpp"
#include "remote_epoch.hpp"
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
using gpufeed::test::rows_of;
using gpufeed::test::temp_dir;
using gpufeed::test::check_epoch;
using gpufeed::test::record_of;
using gpufeed::test::watchdog;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace {

constexpr std::size_t row = 700;  // bytes per fixed-layout record

// Fixed rows: a contiguous shard (200 rows) and a chunked, shuffled and deflated one (300 rows,
// chunks of 50), then the blob layout: a contiguous shard and a chunked+deflated one.
void write_fixed(const fs::path& p, std::uint64_t rows, bool chunked, unsigned seed) {
  gpufeed::test::write_rows(p, rows, row, chunked ? gpufeed::test::rows_layout{50, true, 4}
                                                  : gpufeed::test::rows_layout{},
                            seed);
}

void write_blob(const fs::path& p, std::uint64_t records, bool chunked, unsigned seed) {
  std::vector<std::uint64_t> offsets{0};
  for (std::uint64_t k = 0; k < records; ++k)
    offsets.push_back(offsets.back() + 1 + (k * 37) % 900);
  h5_file f(p);
  dataset_spec d;
  d.dims = {offsets.back()};
  if (chunked) {
    d.chunk = {4096};
    d.deflate = 6;
  }
  f.add(d, gpufeed::test::pattern<std::uint8_t>(offsets.back(), seed));
  f.add_offsets(offsets);
}

struct served {
  temp_dir root{"h5www"};
  nginx_server nginx;
  served()
      : nginx((write_fixed(root / "c.h5", 200, false, 1), write_fixed(root / "z.h5", 300, true, 2),
               write_blob(root / "bc.h5", 120, false, 3), write_blob(root / "bz.h5", 150, true, 4),
               root.path())) {}
  [[nodiscard]] std::vector<std::string> urls(std::initializer_list<const char*> names) const {
    std::vector<std::string> out;
    for (const char* n : names) out.push_back(nginx.url(n));
    return out;
  }
  [[nodiscard]] std::vector<fs::path> paths(std::initializer_list<const char*> names) const {
    std::vector<fs::path> out;
    for (const char* n : names) out.push_back(root / n);
    return out;
  }
};

// Every record of `remote` equals the same record of `local`.
void check_same(const hdf5_source& remote, const hdf5_source& local) {
  REQUIRE(remote.size() == local.size());
  CHECK(remote.max_record_size() == local.max_record_size());
  std::size_t differ = 0;
  for (std::uint64_t i = 0; i < local.size(); ++i)
    if (record_of(remote, i) != record_of(local, i)) ++differ;
  CHECK(differ == 0);
}

}  // namespace

TEST_CASE("hdf5_source over http:// URLs reads the bytes the local shards hold") {
  served s;
  if (!s.nginx.running()) GPUFEED_SKIP_TEST(s.nginx.why_not());
  watchdog dog(120s, "hdf5 shards through nginx");
  SUBCASE("fixed rows: contiguous, then chunked + shuffle + deflate (a header read over HTTP)") {
    const hdf5_source remote(s.urls({"c.h5", "z.h5"}));
    const hdf5_source local(s.paths({"c.h5", "z.h5"}));
    CHECK(remote.shards_opened() == 1);  // lazy: the second is opened by its first read
    // HDF5's metadata is read in blocks: opening one shard and reading the other's header take
    // a few requests, not one per HDF5 read.
    MESSAGE("requests to construct: " << s.nginx.logged_connections().size());
    CHECK(s.nginx.logged_connections().size() <= 8);
    check_same(remote, local);
    const auto info = remote.shard_info(1);
    CHECK(info.path.string() == s.nginx.url("z.h5"));
    CHECK_FALSE(info.mapped);  // a URL is read with ranged GETs, never mapped
  }
  SUBCASE("blob layout: contiguous, then chunked + deflate") {
    const hdf5_source remote(s.urls({"bc.h5", "bz.h5"}));
    const hdf5_source local(s.paths({"bc.h5", "bz.h5"}));
    check_same(remote, local);
  }
  SUBCASE("a URL shard and a local shard in one source, opened eagerly") {
    hdf5_options o;
    o.open = hdf5_options::open_kind::eager;
    const hdf5_source remote(std::vector<std::string>{(s.root / "z.h5").string(),
                                                      s.nginx.url("c.h5")},
                             o);
    const hdf5_source local(s.paths({"z.h5", "c.h5"}));
    check_same(remote, local);
  }
}

TEST_CASE("opening a URL shard of many chunks reads its chunk index in blocks, not per chunk") {
  temp_dir root{"h5many"};
  {
    h5_file f(root / "many.h5");
    dataset_spec d;
    d.dims = {40000, 128};
    d.chunk = {16, 128};  // 2500 chunks over 5 MB, a v1 B-tree of many nodes
    d.deflate = 1;
    f.add(d, gpufeed::test::pattern<std::uint8_t>(40000 * 128, 9));
  }
  nginx_server nginx(root.path());
  if (!nginx.running()) GPUFEED_SKIP_TEST(nginx.why_not());
  watchdog dog(60s, "many chunks");
  const hdf5_source remote(nginx.url("many.h5"));
  const std::size_t requests = nginx.logged_connections().size();
  MESSAGE("requests to open a shard of 2500 chunks (" << fs::file_size(root / "many.h5")
                                                      << " bytes): " << requests);
  CHECK(requests < 2500 / 10);
  check_same(remote, hdf5_source(root / "many.h5"));
}

TEST_CASE("the loader over URL shards delivers every record once, with its bytes") {
  served s;
  if (!s.nginx.running()) GPUFEED_SKIP_TEST(s.nginx.why_not());
  watchdog dog(120s, "loader over URL shards");
  const hdf5_source local(s.paths({"c.h5", "z.h5"}));
  const hdf5_source blob_local(s.paths({"bc.h5", "bz.h5"}));
  for (const auto order :
       {sample_order::sequential, sample_order::shuffled, sample_order::block_shuffled}) {
    CAPTURE(static_cast<int>(order));
    const hdf5_source remote(s.urls({"c.h5", "z.h5"}));
    check_epoch(remote, local, order);
    const hdf5_source blob_remote(s.urls({"bc.h5", "bz.h5"}));
    check_epoch(blob_remote, blob_local, order);
  }
}

TEST_CASE("a URL that is not there is an io_error naming it; reads = map is refused") {
  served s;
  if (!s.nginx.running()) GPUFEED_SKIP_TEST(s.nginx.why_not());
  watchdog dog(60s, "404 and map");
  const std::string missing = s.nginx.url("missing.h5");
  const std::string m = error_of<io_error>([&] { hdf5_source src(missing); });
  CHECK(has(m, missing));
  CHECK(has(m, "404"));
  // A second shard missing: found by its header read at construction, named too.
  const std::string m2 = error_of<io_error>([&] {
    hdf5_source src(std::vector<std::string>{s.nginx.url("c.h5"), missing});
  });
  CHECK(has(m2, missing));
  hdf5_options o;
  o.reads = hdf5_options::read_method::map;
  const std::string m3 = error_of<config_error>([&] { hdf5_source src(s.nginx.url("c.h5"), o); });
  CHECK(has(m3, "map"));
  // Credentials in the URL are never repeated.
  std::string secret = s.nginx.url("missing.h5?X-Amz-Signature=abcdef");
  secret.insert(secret.find("://") + 3, "user:hunter2@");
  const std::string m4 = error_of<gpufeed::error>([&] { hdf5_source src(secret); });
  CHECK_FALSE(has(m4, "hunter2"));
  CHECK_FALSE(has(m4, "abcdef"));
}

TEST_CASE("an object replaced on the server after open fails its reads, never other bytes") {
  served s;
  if (!s.nginx.running()) GPUFEED_SKIP_TEST(s.nginx.why_not());
  watchdog dog(60s, "object replaced");
  for (const char* name : {"c.h5", "z.h5"}) {
    CAPTURE(name);
    const hdf5_source remote(s.nginx.url(name));
    // Records come from remote units fetched whole and held while they are read: `held` reads
    // one before the replacement, so its unit (the version opened) serves the later read too.
    const hdf5_source held(s.nginx.url(name));
    const hdf5_source local(s.root / name);
    CHECK(record_of(held, 7) == record_of(local, 7));
    const auto original = record_of(local, 150);
    // Same size, other bytes, a later modification time (nginx's ETag is time and size).
    const fs::path p = s.root / name;
    const auto when = fs::last_write_time(p);
    write_fixed(p, name[0] == 'c' ? 200 : 300, name[0] == 'z', 99);
    fs::last_write_time(p, when + 10s);
    io_error e("none");
    try {
      const auto got = record_of(remote, 150);
      FAIL("read of a replaced object returned " << got.size() << " bytes");
    } catch (const io_error& err) {
      e = err;
    }
    CHECK(has(e.what(), s.nginx.url(name)));
    CHECK(e.record() == std::optional<std::uint64_t>(150));
    CHECK(has(e.what(), "changed"));
    CHECK(record_of(held, 150) == original);  // the version opened, never other bytes
  }
}

TEST_CASE("a URL shard closed by max_open_shards and replaced meanwhile is refused on reopen") {
  served s;
  if (!s.nginx.running()) GPUFEED_SKIP_TEST(s.nginx.why_not());
  watchdog dog(60s, "reopen identity");
  hdf5_options o;
  o.max_open_shards = 1;
  const hdf5_source remote(s.urls({"c.h5", "z.h5"}), o);
  const hdf5_source local(s.paths({"c.h5", "z.h5"}));
  // Both shards read in turn: each read of the other closes and reopens (ETag and size checked).
  for (std::uint64_t i : {0, 250, 5, 260, 199}) CHECK(record_of(remote, i) == record_of(local, i));
  (void)record_of(remote, 250);  // shard 0 closed now
  const fs::path p = s.root / "c.h5";
  const auto when = fs::last_write_time(p);
  write_fixed(p, 200, false, 42);
  fs::last_write_time(p, when + 10s);
  const std::string m = error_of<format_error>([&] { (void)record_of(remote, 3); });
  CHECK(has(m, "changed"));
  CHECK(has(m, s.nginx.url("c.h5")));
}

TEST_CASE("s3:// shards at a custom endpoint: path style, signed when credentials are set") {
  served s;
  if (!s.nginx.running()) GPUFEED_SKIP_TEST(s.nginx.why_not());
  watchdog dog(60s, "s3 URLs");
  gpufeed::test::env_guard env;
  gpufeed::test::clean_aws_environment(env, (s.root / "home").string());
  std::string endpoint = s.nginx.url("");
  endpoint.pop_back();  // "http://127.0.0.1:<port>"
  env.set("AWS_ENDPOINT_URL_S3", endpoint);
  env.set("AWS_REGION", "eu-west-3");
  fs::create_directories(s.root / "bucket" / "dir");
  for (const char* n : {"c.h5", "z.h5"}) fs::copy_file(s.root / n, s.root / "bucket" / "dir" / n);
  const hdf5_source local(s.paths({"c.h5", "z.h5"}));
  const std::vector<std::string> urls{"s3://bucket/dir/c.h5", "s3://bucket/dir/z.h5"};
  SUBCASE("anonymous: unsigned requests") {
    namespace r = gpufeed::detail::remote;
    CHECK_FALSE(r::plan_s3_request(urls[0]).signer);
    check_same(hdf5_source(urls), local);
  }
  SUBCASE("with credentials: every request signed, no secret in any message") {
    namespace r = gpufeed::detail::remote;
    const std::string secret = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";
    env.set("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE");
    env.set("AWS_SECRET_ACCESS_KEY", secret);
    const r::s3_request_plan p = r::plan_s3_request(urls[0]);
    CHECK(p.url == endpoint + "/bucket/dir/c.h5");
    REQUIRE(p.signer);
    r::http_request q{"GET", p.url, {{"Range", "bytes=0-0"}}};
    p.signer(q);
    std::string auth, sha;
    for (const auto& h : q.headers) {
      if (h.name == "Authorization") auth = h.value;
      if (h.name == "x-amz-content-sha256") sha = h.value;
    }
    CHECK(sha == std::string(r::empty_payload_sha256));
    CHECK(has(auth, "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/"));
    CHECK(has(auth, "/eu-west-3/s3/aws4_request"));
    CHECK(has(auth, "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date"));
    check_same(hdf5_source(urls), local);
    const std::string m = error_of<io_error>([&] { hdf5_source src("s3://bucket/dir/none.h5"); });
    CHECK(has(m, "s3://bucket/dir/none.h5"));
    CHECK(has(m, "404"));
    CHECK_FALSE(has(m, secret));
    CHECK_FALSE(has(m, "Signature="));
  }
}

TEST_CASE("s3:// shards against a store that checks every request's SigV4 signature") {
  temp_dir root{"h5s3"};
  fs::create_directories(root / "bucket" / "dir");
  write_fixed(root / "bucket" / "dir" / "c.h5", 200, false, 1);
  write_fixed(root / "bucket" / "dir" / "z.h5", 300, true, 2);
  const std::string secret = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";
  const gpufeed::test::fault_server store(root.path(),
                                          {"--sigv4", "AKIDEXAMPLE:" + secret + ":eu-west-3"});
  if (!store.running()) GPUFEED_SKIP_TEST(store.why_not());
  watchdog dog(60s, "s3 URLs, signatures checked");
  gpufeed::test::env_guard env;
  gpufeed::test::clean_aws_environment(env, (root / "home").string());
  std::string endpoint = store.url("");
  endpoint.pop_back();
  env.set("AWS_ENDPOINT_URL_S3", endpoint);
  env.set("AWS_REGION", "eu-west-3");
  const std::vector<std::string> urls{"s3://bucket/dir/c.h5", "s3://bucket/dir/z.h5"};
  const hdf5_source local(std::vector<fs::path>{root / "bucket" / "dir" / "c.h5",
                                                root / "bucket" / "dir" / "z.h5"});
  SUBCASE("the right key: every request accepted, every record right, in the loader too") {
    env.set("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE");
    env.set("AWS_SECRET_ACCESS_KEY", secret);
    const hdf5_source remote(urls);
    check_same(remote, local);
    check_epoch(remote, local, sample_order::block_shuffled);
  }
  SUBCASE("another secret: 403 at open, naming the s3:// URL and no secret") {
    env.set("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE");
    env.set("AWS_SECRET_ACCESS_KEY", "not-the-secret");
    const std::string m = error_of<io_error>([&] { hdf5_source src(urls); });
    CHECK(has(m, "s3://bucket/dir/c.h5"));
    CHECK(has(m, "403"));
    CHECK_FALSE(has(m, "not-the-secret"));
    CHECK_FALSE(has(m, "Signature="));
  }
  SUBCASE("no credentials: unsigned requests, refused") {
    const std::string m = error_of<io_error>([&] { hdf5_source src(urls); });
    CHECK(has(m, "403"));
  }
}

TEST_CASE("labels read over HTTP; a shard needing the H5Dread fallback is refused for a URL") {
  temp_dir root{"h5lab"};
  const std::uint64_t rows = 90;
  {
    h5_file f(root / "l.h5");
    dataset_spec d;
    d.dims = {rows, 16};
    d.chunk = {10, 16};
    d.deflate = 1;
    f.add(d, gpufeed::test::pattern<std::uint8_t>(rows * 16, 5));
    dataset_spec l;
    l.name = "labels";
    l.file_type = H5T_STD_I64LE;
    l.mem_type = H5T_NATIVE_INT64;
    l.dims = {rows};
    f.add(l, gpufeed::test::pattern<std::int64_t>(rows, 6));
  }
  {
    h5_file f(root / "compact.h5");
    dataset_spec d;
    d.dims = {20, 8};
    d.compact = true;  // compact storage: read through H5Dread
    f.add(d, gpufeed::test::pattern<std::uint8_t>(160, 7));
  }
  nginx_server nginx(root.path());
  if (!nginx.running()) GPUFEED_SKIP_TEST(nginx.why_not());
  watchdog dog(60s, "labels and fallback");
  const hdf5_source remote(nginx.url("l.h5"));
  const hdf5_source local(root / "l.h5");
  REQUIRE(remote.has_labels());
  for (std::uint64_t i = 0; i < rows; ++i) CHECK(remote.label(i) == local.label(i));
  check_same(remote, local);
  const std::string m =
      error_of<unsupported_error>([&] { hdf5_source src(nginx.url("compact.h5")); });
  CHECK(has(m, nginx.url("compact.h5")));
  CHECK(has(m, "H5Dread"));
}
