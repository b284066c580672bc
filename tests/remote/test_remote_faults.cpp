// The HTTP byte source (gpufeed/detail/remote/http_file.hpp) against fault_server.py on the
// loopback interface, one failure mode per case: transient ones (resets, 503 SlowDown, 429,
// 500, stalls, truncated bodies) give the file's bytes after retries, counted; final ones (404,
// 403, a wrong Content-Range, a body longer than its range, ranges ignored, the object changed)
// give the io_error that says so and names the URL. Never wrong bytes, never a hang: each case
// runs under a watchdog, and the faults are drawn from a seeded generator (the same every run for
// a client reading from one thread).
#include <doctest/doctest.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "../io/byte_files.hpp"
#include "expect_error.hpp"
#include "gpufeed/detail/remote/http_file.hpp"
#include "gpufeed/detail/remote/response_check.hpp"
#include "gpufeed/error.hpp"
#include "remote_files.hpp"
#include "test_servers.hpp"
#include "test_skip.hpp"
#include "test_util.hpp"
#include "watchdog.hpp"

using gpufeed::io_error;
using gpufeed::detail::remote::http_file;
using gpufeed::detail::remote::http_options;
using gpufeed::detail::remote::parse_content_range;
using gpufeed::detail::remote::s3_error_code;
using gpufeed::test::fault_server;
using gpufeed::test::has;
using gpufeed::test::io_error_of;
using gpufeed::test::pattern;
using gpufeed::test::quick_options;
using gpufeed::test::read_at;
using gpufeed::test::slice;
using gpufeed::test::temp_dir;
using gpufeed::test::watchdog;
using gpufeed::test::write_bytes;
using namespace std::chrono_literals;

namespace {

constexpr std::size_t file_size = 100000;

struct faulty {
  temp_dir root{"faults"};
  std::vector<std::byte> bytes = pattern(file_size, 3);
  fault_server server;
  explicit faulty(const std::vector<std::string>& args)
      : server((write_bytes(root / "data.bin", bytes), root.path()), args) {
    REQUIRE_MESSAGE(server.running(), server.why_not());
  }
  [[nodiscard]] std::string url() const { return server.url("data.bin"); }
};

// Reads `count` random ranges from one thread; every one must equal the file's bytes.
void read_randomly(const http_file& f, const std::vector<std::byte>& bytes, int count) {
  std::mt19937_64 rng(5);
  for (int i = 0; i < count; ++i) {
    const std::uint64_t at = rng() % file_size;
    const std::size_t n =
        1 + static_cast<std::size_t>(rng() % std::min<std::uint64_t>(9000, file_size - at));
    CHECK(read_at(f, at, n) == slice(bytes, at, n));
  }
}

// Options for stalls: a request that has not finished in 400 ms has stalled.
http_options stall_options() {
  auto o = quick_options();
  o.request_timeout = 400ms;
  return o;
}

}  // namespace

TEST_CASE("transient faults give the file's bytes after retries, counted") {
  for (const char* fault : {"reset", "slowdown", "throttle", "error500"}) {
    CAPTURE(fault);
    watchdog dog(60s, std::string("reads under fault ") + fault);
    faulty s({"--fault", fault, "--rate", "0.3", "--seed", "11", "--skip", "1"});
    const http_file f(s.url(), quick_options());
    read_randomly(f, s.bytes, 40);
    const auto st = f.stats();
    CHECK(st.retries > 0);
    CHECK(st.failures == 0);
    CHECK(st.requests == 41 + st.retries);
  }
}

TEST_CASE("a stalled answer times out and is tried again") {
  watchdog dog(60s, "reads under stalls");
  faulty s({"--fault", "stall", "--rate", "0.3", "--seed", "2", "--skip", "1", "--stall", "3"});
  const http_file f(s.url(), stall_options());
  read_randomly(f, s.bytes, 10);
  CHECK(f.stats().retries > 0);
  CHECK(f.stats().failures == 0);
}

TEST_CASE("a body cut short is a short read the seam continues, never zeros") {
  for (const char* fault : {"truncate", "stall_body"}) {
    CAPTURE(fault);
    watchdog dog(60s, std::string("reads under fault ") + fault);
    faulty s({"--fault", fault, "--rate", "0.3", "--seed", "4", "--skip", "1", "--stall", "3"});
    const http_file f(s.url(), stall_options());
    read_randomly(f, s.bytes, 10);
    CHECK(f.stats().short_bodies > 0);
    CHECK(f.stats().failures == 0);
  }
}

TEST_CASE("eight threads read byte-equal through resets and 503s") {
  watchdog dog(60s, "eight threads under faults");
  faulty s({"--fault", "slowdown", "--rate", "0.2", "--seed", "8", "--skip", "1"});
  const http_file f(s.url(), quick_options());
  std::atomic<int> wrong{0}, errors{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < 8; ++t) {
    pool.emplace_back([&, t] {
      std::mt19937_64 rng(static_cast<unsigned>(t) + 100);
      for (int i = 0; i < 20; ++i) {
        const std::uint64_t at = rng() % file_size;
        const std::size_t n =
            1 + static_cast<std::size_t>(rng() % std::min<std::uint64_t>(5000, file_size - at));
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
  CHECK(f.stats().retries > 0);
}

TEST_CASE("retries spent on 503 SlowDown: io_error naming the URL, the code and the attempts") {
  watchdog dog(60s, "SlowDown for ever");
  faulty s({"--fault", "slowdown", "--rate", "1", "--skip", "1"});
  auto o = quick_options();
  o.retry.max_attempts = 3;
  const http_file f(s.url(), o);
  const io_error e = io_error_of([&] { (void)read_at(f, 10, 10); });
  CHECK(has(e.what(), "HTTP 503 (Service Unavailable, SlowDown)"));
  CHECK(has(e.what(), "after 3 attempts"));
  CHECK(has(e.what(), "bytes=10-19"));
  CHECK(e.file() == s.url());
  CHECK(e.status() == EAGAIN);
  CHECK(f.stats().retries == 2);
  CHECK(f.stats().failures == 1);
}

TEST_CASE("retries stop at the policy's total time, however many attempts it allows") {
  watchdog dog(60s, "throttled for ever");
  faulty s({"--fault", "throttle", "--rate", "1", "--skip", "1"});
  auto o = quick_options();
  o.retry.max_attempts = 100000;
  o.retry.base_delay = 50ms;
  o.retry.max_delay = 100ms;
  o.retry.max_total = 600ms;
  const http_file f(s.url(), o);
  const auto start = std::chrono::steady_clock::now();
  const io_error e = io_error_of([&] { (void)read_at(f, 0, 10); });
  const auto took = std::chrono::steady_clock::now() - start;
  CHECK(took < 5s);
  CHECK(has(e.what(), "HTTP 429 (Too Many Requests, TooManyRequests)"));
  CHECK(e.status() == EAGAIN);
  CHECK(f.stats().retries > 0);
  CHECK(f.stats().retries < 100);
}

TEST_CASE("final answers are errors at once, not retried") {
  struct expectation {
    const char* fault;
    const char* text;
    int err;
  };
  for (const expectation& x : {expectation{"not_found", "HTTP 404 (Not Found, NoSuchKey)", ENOENT},
                               expectation{"forbidden", "HTTP 403 (Forbidden, AccessDenied)", EACCES},
                               expectation{"bad_range", "Content-Range 'bytes 11-20/100000'",
                                           EPROTO},
                               expectation{"long_body", "more bytes than its Content-Range",
                                           EPROTO},
                               expectation{"no_range", "ignored the Range header", EOPNOTSUPP}}) {
    CAPTURE(x.fault);
    watchdog dog(60s, std::string("final fault ") + x.fault);
    faulty s({"--fault", x.fault, "--rate", "1", "--skip", "1"});
    const http_file f(s.url(), quick_options());
    std::vector<std::byte> buf(10, std::byte{0});
    const io_error e = io_error_of([&] { f.read_exact(buf.data(), buf.size(), 10); });
    CHECK(has(e.what(), x.text));
    CHECK(e.status() == x.err);
    CHECK(e.file() == s.url());
    CHECK(f.stats().retries == 0);
    CHECK(f.stats().bytes == 0);
  }
}

TEST_CASE("at open: 404, 403 and a server without ranges are io_errors naming the URL") {
  for (const char* fault : {"not_found", "forbidden", "no_range"}) {
    CAPTURE(fault);
    watchdog dog(60s, std::string("open under fault ") + fault);
    faulty s({"--fault", fault, "--rate", "1"});
    const io_error e = io_error_of([&] { http_file f(s.url(), quick_options()); });
    CHECK(has(e.what(), "cannot open remote object"));
    CHECK(e.file() == s.url());
  }
}

TEST_CASE("an object that changes during reading is an error, with or without If-Match") {
  for (const bool honours : {true, false}) {
    CAPTURE(honours);
    watchdog dog(60s, "a changing object");
    std::vector<std::string> args{"--fault", "change", "--skip", "1"};
    if (!honours) args.push_back("--ignore-if-match");
    faulty s(args);
    const http_file f(s.url(), quick_options());
    const io_error e = io_error_of([&] { (void)read_at(f, 0, 100); });
    CHECK(has(e.what(), "the object changed during reading"));
    CHECK(has(e.what(), honours ? "HTTP 412" : "now \"v2-"));
    CHECK(e.status() == ESTALE);
    CHECK(e.file() == s.url());
    CHECK(f.stats().retries == 0);
  }
}

TEST_CASE("without an ETag, Last-Modified guards the reads") {
  watchdog dog(60s, "an object without an ETag");
  {
    faulty s({"--no-etag"});
    const http_file f(s.url(), quick_options());
    CHECK(f.identity().etag.empty());
    CHECK(!f.identity().last_modified.empty());
    read_randomly(f, s.bytes, 5);
  }
  faulty s({"--no-etag", "--fault", "change", "--skip", "1"});
  const http_file f(s.url(), quick_options());
  const io_error e = io_error_of([&] { (void)read_at(f, 0, 100); });
  CHECK(has(e.what(), "the object changed during reading (Last-Modified"));
  CHECK(e.status() == ESTALE);
}

TEST_CASE("an empty object, answered 416 with bytes */0, opens with size 0") {
  watchdog dog(60s, "an empty object");
  faulty s({});
  write_bytes(s.root / "empty.bin", {});
  const http_file f(s.server.url("empty.bin"), quick_options());
  CHECK(f.size() == 0);
  std::byte b{};
  CHECK(f.try_read(&b, 1, 0).why == gpufeed::detail::io::read_outcome::stop::ended);
}

TEST_CASE("Content-Range and S3 error bodies are parsed strictly") {
  const auto r = parse_content_range("bytes 10-19/100");
  REQUIRE(r);
  CHECK(r->satisfied);
  CHECK(r->first == 10);
  CHECK(r->last == 19);
  CHECK(r->total == 100u);
  const auto u = parse_content_range("bytes */0");
  REQUIRE(u);
  CHECK(!u->satisfied);
  CHECK(u->total == 0u);
  CHECK(parse_content_range("bytes 0-9/*"));
  CHECK(!parse_content_range("bytes 0-9/*")->total);
  for (const char* bad : {"", "bytes", "bytes 9-0/10", "bytes 0-10/10", "items 0-1/2",
                          "bytes 0-1", "bytes -1-2/3", "bytes 0-x/3", "bytes */*"})
    CHECK_MESSAGE(!parse_content_range(bad), bad);
  CHECK(s3_error_code("<Error><Code>SlowDown</Code></Error>") == "SlowDown");
  CHECK(s3_error_code("<html>busy</html>").empty());
}
