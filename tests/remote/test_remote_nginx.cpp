// The HTTP byte source (gpufeed/detail/remote/http_file.hpp) against nginx on the loopback
// interface, serving a temporary directory: random ranges read byte-equal to the file (empty
// reads, the last byte, reads past the end an io_error, never zeros), scatter reads, eight
// threads at once, connections kept alive and reused, a file changed while open refused (If-Match),
// 404 and 403 at open naming the URL without its credentials or query, the signing hook called
// for every request, HTTPS with HTTP/2 (a certificate made by the openssl tool). Skips when nginx
// is not installed (scripts/setup.sh installs it).
#include <doctest/doctest.h>

#include <sys/uio.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "../io/byte_files.hpp"
#include "expect_error.hpp"
#include "gpufeed/detail/io/byte_source.hpp"
#include "gpufeed/detail/remote/http_file.hpp"
#include "gpufeed/error.hpp"
#include "remote_files.hpp"
#include "test_servers.hpp"
#include "test_skip.hpp"
#include "test_util.hpp"
#include "watchdog.hpp"

using gpufeed::format_error;
using gpufeed::io_error;
using gpufeed::detail::io::byte_range;
using gpufeed::detail::io::owned_source;
using gpufeed::detail::io::read_outcome;
using gpufeed::detail::remote::http_file;
using gpufeed::detail::remote::http_request;
using gpufeed::test::has;
using gpufeed::test::io_error_of;
using gpufeed::test::nginx_server;
using gpufeed::test::pattern;
using gpufeed::test::quick_options;
using gpufeed::test::read_at;
using gpufeed::test::slice;
using gpufeed::test::temp_dir;
using gpufeed::test::watchdog;
using gpufeed::test::write_bytes;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace {

constexpr std::size_t file_size = 3 * 65536 + 1234;

struct served {
  temp_dir root{"www"};
  std::vector<std::byte> bytes = pattern(file_size, 7);
  nginx_server nginx;
  served() : nginx((write_bytes(root / "data.bin", bytes), root.path())) {
    fs::create_directories(root / "closed");  // a directory without an index: 403
  }
};

}  // namespace

TEST_CASE("random ranges read through nginx equal the file's bytes") {
  served s;
  if (!s.nginx.running()) GPUFEED_SKIP_TEST(s.nginx.why_not());
  watchdog dog(60s, "reads through nginx");
  const http_file f(s.nginx.url("data.bin"), quick_options());
  CHECK(f.size() == file_size);
  CHECK(f.name() == s.nginx.url("data.bin"));
  CHECK(!f.identity().etag.empty());

  std::mt19937_64 rng(42);
  for (int i = 0; i < 200; ++i) {
    const std::uint64_t at = rng() % file_size;
    const std::size_t n = static_cast<std::size_t>(rng() % std::min<std::uint64_t>(
                                                                70000, file_size - at + 1));
    CHECK(read_at(f, at, n) == slice(s.bytes, at, n));
  }
  CHECK(read_at(f, 0, 0).empty());
  CHECK(read_at(f, file_size - 1, 1) == slice(s.bytes, file_size - 1, 1));
  CHECK(read_at(f, 0, file_size) == s.bytes);

  // Past the end: the seam's early end at the size, never zeros.
  std::vector<std::byte> buf(100, std::byte{0});
  const read_outcome o = f.try_read(buf.data(), buf.size(), file_size - 10);
  CHECK(o.why == read_outcome::stop::ended);
  CHECK(o.at == file_size);
  CHECK(slice(buf, 0, 10) == slice(s.bytes, file_size - 10, 10));
  const io_error e = io_error_of([&] { (void)read_at(f, file_size - 5, 6); });
  CHECK(has(e.what(), "unexpected end of file at byte " + std::to_string(file_size)));
  CHECK(e.file() == s.nginx.url("data.bin"));
  CHECK(f.try_read(buf.data(), 1, file_size + 100).why == read_outcome::stop::ended);

  const auto st = f.stats();
  CHECK(st.failures == 0);
  CHECK(st.retries == 0);
  CHECK(st.requests >= 200);
  std::uint64_t timed = 0;
  for (const std::uint64_t k : st.latency_us) timed += k;
  CHECK(timed == st.requests);
  CHECK(st.mean_latency_us() > 0.0);
}

TEST_CASE("scatter reads fill several buffers from one ranged GET") {
  served s;
  if (!s.nginx.running()) GPUFEED_SKIP_TEST(s.nginx.why_not());
  watchdog dog(60s, "scatter reads through nginx");
  const http_file f(s.nginx.url("data.bin"), quick_options());
  std::vector<std::byte> a(1000), b(1), c(30000);
  const std::vector<byte_range> ranges{{a.data(), a.size(), 500},
                                       {b.data(), b.size(), 1500},
                                       {c.data(), c.size(), 1501}};
  const auto before = f.stats().requests;
  f.read_ranges(ranges);
  CHECK(f.stats().requests == before + 1);
  CHECK(a == slice(s.bytes, 500, 1000));
  CHECK(b == slice(s.bytes, 1500, 1));
  CHECK(c == slice(s.bytes, 1501, 30000));
}

TEST_CASE("an empty object opens with size 0 and ends at once; a shard holds the reader") {
  served s;
  if (!s.nginx.running()) GPUFEED_SKIP_TEST(s.nginx.why_not());
  watchdog dog(60s, "an empty object through nginx");
  write_bytes(s.root / "empty.bin", {});
  const http_file e(s.nginx.url("empty.bin"), quick_options());
  CHECK(e.size() == 0);
  std::byte b{};
  const read_outcome o = e.try_read(&b, 1, 0);
  CHECK(o.why == read_outcome::stop::ended);
  CHECK(o.at == 0);

  const owned_source shard(std::make_unique<http_file>(s.nginx.url("data.bin"), quick_options()));
  REQUIRE(shard.as<http_file>() != nullptr);
  std::vector<std::byte> buf(64);
  shard.read_exact(buf.data(), buf.size(), 4096, 7);
  CHECK(buf == slice(s.bytes, 4096, 64));
}

TEST_CASE("eight threads read at once, byte-equal, on connections kept alive") {
  served s;
  if (!s.nginx.running()) GPUFEED_SKIP_TEST(s.nginx.why_not());
  watchdog dog(60s, "eight threads reading through nginx");
  const http_file f(s.nginx.url("data.bin"), quick_options());
  constexpr int threads = 8, reads = 60;
  std::atomic<int> wrong{0}, errors{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      std::mt19937_64 rng(static_cast<unsigned>(t) + 1);
      for (int i = 0; i < reads; ++i) {
        const std::uint64_t at = rng() % file_size;
        const std::size_t n = 1 + static_cast<std::size_t>(rng() % std::min<std::uint64_t>(
                                                                    20000, file_size - at));
        try {
          if (read_at(f, at, n) != slice(s.bytes, at, n)) ++wrong;
        } catch (const std::exception&) {
          ++errors;
        }
      }
    });
  }
  for (auto& th : pool) th.join();
  CHECK(wrong == 0);
  CHECK(errors == 0);
  const auto st = f.stats();
  CHECK(st.requests == threads * reads + 1);
  CHECK(st.bytes > 0);
  // nginx logs a request once it is answered: wait for the last line.
  std::vector<long> conns;
  for (int i = 0; i < 100 && conns.size() < st.requests; ++i) {
    conns = s.nginx.logged_connections();
    if (conns.size() < st.requests) std::this_thread::sleep_for(10ms);
  }
  REQUIRE(conns.size() == st.requests);
  const std::set<long> distinct(conns.begin(), conns.end());
  CHECK(distinct.size() <= static_cast<std::size_t>(threads) + 1);  // one handle per thread
}

TEST_CASE("reads from one thread reuse one connection") {
  served s;
  if (!s.nginx.running()) GPUFEED_SKIP_TEST(s.nginx.why_not());
  watchdog dog(60s, "sequential reads through nginx");
  {
    const http_file f(s.nginx.url("data.bin"), quick_options());
    for (int i = 0; i < 50; ++i) (void)read_at(f, static_cast<std::uint64_t>(i) * 100, 100);
  }
  std::vector<long> conns;
  for (int i = 0; i < 100 && conns.size() < 51; ++i) {
    conns = s.nginx.logged_connections();
    if (conns.size() < 51) std::this_thread::sleep_for(10ms);
  }
  REQUIRE(conns.size() == 51);
  CHECK(std::set<long>(conns.begin(), conns.end()).size() == 1);
}

TEST_CASE("a file changed while open fails its next read; reopen refuses it") {
  served s;
  if (!s.nginx.running()) GPUFEED_SKIP_TEST(s.nginx.why_not());
  watchdog dog(60s, "a changed file through nginx");
  http_file f(s.nginx.url("data.bin"), quick_options());
  CHECK(read_at(f, 10, 10) == slice(s.bytes, 10, 10));
  // Same size, other bytes and another modification time: nginx's ETag changes.
  write_bytes(s.root / "data.bin", pattern(file_size, 99));
  fs::last_write_time(s.root / "data.bin", fs::file_time_type::clock::now() + 1h);
  const io_error e = io_error_of([&] { (void)read_at(f, 10, 10); });
  CHECK(has(e.what(), "the object changed during reading"));
  CHECK(has(e.what(), "412"));
  CHECK(e.file() == s.nginx.url("data.bin"));
  CHECK(e.status() == ESTALE);
  CHECK(f.stats().failures == 1);
  f.close();
  const std::string m = gpufeed::test::error_of<format_error>([&] { f.reopen(); });
  CHECK(has(m, "changed since it was first opened"));
}

TEST_CASE("close and reopen of an unchanged file read on") {
  served s;
  if (!s.nginx.running()) GPUFEED_SKIP_TEST(s.nginx.why_not());
  watchdog dog(60s, "close and reopen through nginx");
  http_file f(s.nginx.url("data.bin"), quick_options());
  CHECK(read_at(f, 1, 5) == slice(s.bytes, 1, 5));
  f.close();
  f.reopen();
  CHECK(read_at(f, 1000, 5) == slice(s.bytes, 1000, 5));
}

TEST_CASE("404 and 403 at open name the URL, never its credentials or query") {
  served s;
  if (!s.nginx.running()) GPUFEED_SKIP_TEST(s.nginx.why_not());
  watchdog dog(60s, "failed opens through nginx");
  const std::string secret_url = "http://alice:hunter2@" + s.nginx.url("missing.bin").substr(7) +
                                 "?X-Amz-Signature=deadbeefsecret";
  const io_error e = io_error_of([&] { http_file f(secret_url, quick_options()); });
  CHECK(has(e.what(), "cannot open remote object: HTTP 404 (Not Found)"));
  CHECK(e.file() == s.nginx.url("missing.bin"));
  CHECK(!has(e.what(), "hunter2"));
  CHECK(!has(e.what(), "alice"));
  CHECK(!has(e.what(), "deadbeefsecret"));
  CHECK(e.status() == ENOENT);

  const io_error d = io_error_of([&] { http_file f(s.nginx.url("closed/"), quick_options()); });
  CHECK(has(d.what(), "HTTP 403 (Forbidden)"));
  CHECK(d.status() == EACCES);
}

TEST_CASE("the signing hook sees and extends every request, retries included") {
  served s;
  if (!s.nginx.running()) GPUFEED_SKIP_TEST(s.nginx.why_not());
  watchdog dog(60s, "signed requests through nginx");
  auto o = quick_options();
  std::mutex m;
  std::vector<std::string> ranges;
  o.signer = [&](http_request& r) {
    CHECK(r.method == "GET");
    std::lock_guard lock(m);
    for (const auto& h : r.headers)
      if (h.name == "Range") ranges.push_back(h.value);
    r.headers.push_back({"Authorization", "test-signature"});
  };
  const http_file f(s.nginx.url("data.bin"), o);
  CHECK(read_at(f, 100, 50) == slice(s.bytes, 100, 50));
  REQUIRE(ranges.size() == 2);
  CHECK(ranges[0] == "bytes=0-0");
  CHECK(ranges[1] == "bytes=100-149");

  bool fail = false;
  o.signer = [&](http_request&) {
    if (fail) throw std::runtime_error("no credentials");
  };
  const http_file g(s.nginx.url("data.bin"), o);
  fail = true;
  const io_error e = io_error_of([&] { (void)read_at(g, 0, 10); });
  CHECK(has(e.what(), "signing the request failed: no credentials"));
}

TEST_CASE("a server that is not there fails the open after the retries, in bounded time") {
  watchdog dog(60s, "connecting to nothing");
  auto o = quick_options();
  o.retry.max_attempts = 3;
  const std::string url =
      "http://127.0.0.1:" + std::to_string(gpufeed::test::free_port()) + "/x.bin";
  const io_error e = io_error_of([&] { http_file f(url, o); });
  CHECK(has(e.what(), "cannot open remote object"));
  CHECK(has(e.what(), "after 3 attempts"));
  CHECK(e.status() == ECONNREFUSED);
  CHECK(e.file() == url);
}

TEST_CASE("HTTPS with HTTP/2: byte-equal reads from four threads; an unknown certificate is final") {
  temp_dir root{"www"};
  const std::vector<std::byte> bytes = pattern(file_size, 5);
  write_bytes(root / "data.bin", bytes);
  nginx_server nginx(root.path(), true);
  if (!nginx.running()) GPUFEED_SKIP_TEST(nginx.why_not());
  watchdog dog(60s, "reads through nginx over HTTPS");

  auto o = quick_options();
  o.ca_file = nginx.cert_file().string();  // the test's own certificate authority
  const http_file f(nginx.url("data.bin"), o);
  CHECK(f.size() == file_size);
  std::atomic<int> wrong{0}, errors{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < 4; ++t) {
    pool.emplace_back([&, t] {
      std::mt19937_64 rng(static_cast<unsigned>(t) + 50);
      for (int i = 0; i < 25; ++i) {
        const std::uint64_t at = rng() % file_size;
        const std::size_t n = 1 + static_cast<std::size_t>(rng() % std::min<std::uint64_t>(
                                                                    40000, file_size - at));
        try {
          if (read_at(f, at, n) != slice(bytes, at, n)) ++wrong;
        } catch (const std::exception&) {
          ++errors;
        }
      }
    });
  }
  for (auto& th : pool) th.join();
  CHECK(wrong == 0);
  CHECK(errors == 0);
  std::vector<std::string> protocols;
  for (int i = 0; i < 100 && protocols.size() < 101; ++i) {
    protocols = nginx.logged_protocols();
    if (protocols.size() < 101) std::this_thread::sleep_for(10ms);
  }
  REQUIRE(protocols.size() == 101);
  CHECK(std::count(protocols.begin(), protocols.end(), "HTTP/2.0") == 101);

  // Against the system's authorities the self-signed certificate is refused, at once.
  const io_error e = io_error_of([&] { http_file g(nginx.url("data.bin"), quick_options()); });
  CHECK(has(e.what(), "cannot open remote object"));
  CHECK(e.status() == EPROTO);
  CHECK(!has(e.what(), "attempts"));
}
