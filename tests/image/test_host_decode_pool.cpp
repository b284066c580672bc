// detail::image::host_decode_pool, the CPU decoders of the GPU JPEG path's fallback: every index
// of a run is handed out exactly once; no decoder is used by two calls at once; each decodes a
// JPEG to djpeg's pixels; a call's exception reaches the caller after the others finish, and the
// pool runs again afterwards.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "gpufeed/detail/image/host_decode_pool.hpp"
#include "image_test_util.hpp"
#include "test_util.hpp"

using gpufeed::detail::image::host_decode_pool;
using gpufeed::image::image_decoder;
using gpufeed::image::rgb_image;

TEST_CASE("host_decode_pool: every index once, one call per decoder at a time") {
  for (const std::size_t threads : {0, 1, 2, 4}) {
    host_decode_pool pool(threads);
    CHECK(pool.threads() == (threads == 0 ? 1 : threads));
    for (const std::size_t n : {0, 1, 3, 257, 5000}) {
      CAPTURE(threads);
      CAPTURE(n);
      std::vector<std::atomic<int>> calls(n);
      std::mutex m;
      std::map<const image_decoder*, int> busy;
      bool shared = false;
      std::atomic<std::size_t> callers{0};
      pool.run(n, [&](std::size_t k, image_decoder& d, rgb_image&) {
        {
          std::lock_guard lock(m);
          if (busy[&d]++ > 0) shared = true;
        }
        calls[k].fetch_add(1);
        if (k % 64 == 0) std::this_thread::yield();
        callers.fetch_add(1);
        std::lock_guard lock(m);
        --busy[&d];
      });
      for (std::size_t k = 0; k < n; ++k) CHECK(calls[k].load() == 1);
      CHECK(callers.load() == n);
      CHECK_FALSE(shared);
      CHECK(busy.size() <= pool.threads());
    }
  }
}

TEST_CASE("host_decode_pool: each decoder decodes a JPEG to djpeg's pixels") {
  gpufeed::test::temp_dir dir("hostpool");
  const auto picture = gpufeed::test::synthetic_picture(97, 61);
  const auto jpeg = gpufeed::test::cjpeg(dir.path(), picture, "-quality 90", "a");
  const auto want = gpufeed::test::djpeg(dir.path(), jpeg, 1, "a");
  host_decode_pool pool(3);
  std::vector<rgb_image> out(40);
  pool.run(out.size(), [&](std::size_t k, image_decoder& d, rgb_image& img) {
    d.decode(jpeg, img);
    out[k] = rgb_image(img.width(), img.height());
    std::memcpy(out[k].data(), img.data(), img.size_bytes());
  });
  for (const rgb_image& img : out) {
    REQUIRE(img.width() == want.width);
    REQUIRE(img.height() == want.height);
    CHECK(std::memcmp(img.data(), want.data.data(), img.size_bytes()) == 0);
  }
}

TEST_CASE("host_decode_pool: a call's exception reaches the caller; the pool runs again") {
  host_decode_pool pool(4);
  std::atomic<std::size_t> ran{0};
  CHECK_THROWS_WITH_AS(pool.run(1000,
                                [&](std::size_t k, image_decoder&, rgb_image&) {
                                  ran.fetch_add(1);
                                  if (k == 13) throw std::runtime_error("record 13");
                                }),
                       "record 13", std::runtime_error);
  CHECK(ran.load() >= 1);
  CHECK(ran.load() <= 1000);
  std::vector<std::atomic<int>> calls(100);
  pool.run(calls.size(), [&](std::size_t k, image_decoder&, rgb_image&) { calls[k].fetch_add(1); });
  for (const auto& c : calls) CHECK(c.load() == 1);
}

TEST_CASE("host_decode_pool: lead runs once on the caller while the pool's threads decode") {
  host_decode_pool pool(3);
  std::atomic<int> others{0};
  std::atomic<int> leads{0};
  const auto caller = std::this_thread::get_id();
  bool overlapped = false;
  pool.run(
      64,
      [&](std::size_t, image_decoder&, rgb_image&) {
        if (std::this_thread::get_id() != caller) others.fetch_add(1);
      },
      [&] {
        leads.fetch_add(1);
        CHECK(std::this_thread::get_id() == caller);
        // The other threads take calls before this thread joins them.
        for (int spin = 0; spin < 20000 && others.load() == 0; ++spin)
          std::this_thread::sleep_for(std::chrono::microseconds(50));
        overlapped = others.load() > 0;
      });
  CHECK(leads.load() == 1);
  CHECK(overlapped);
  int ran = 0;
  pool.run(0, [](std::size_t, image_decoder&, rgb_image&) {}, [&] { ++ran; });
  CHECK(ran == 1);
}

TEST_CASE("host_decode_pool: lead's exception reaches the caller after every call") {
  host_decode_pool pool(2);
  std::atomic<int> calls{0};
  CHECK_THROWS_AS(pool.run(
                      32,
                      [&](std::size_t, image_decoder&, rgb_image&) {
                        std::this_thread::sleep_for(std::chrono::microseconds(100));
                        calls.fetch_add(1);
                      },
                      [] { throw std::runtime_error("submit failed"); }),
                  std::runtime_error);
  CHECK(calls.load() == 32);
  pool.run(5, [&](std::size_t, image_decoder&, rgb_image&) { calls.fetch_add(1); });
  CHECK(calls.load() == 37);
}
