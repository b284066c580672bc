// Unit tests of the decoded-chunk cache shared by a source's readers (shared_chunk_cache.hpp):
// decode once, the byte budget across its stripes, the eviction rule (spent chunks first),
// failed decodes, and many threads on few chunks.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <stdexcept>
#include <thread>
#include <vector>

#include "gpufeed/detail/unit_cache/shared_chunk_cache.hpp"

using gpufeed::detail::byte_buffer;
using gpufeed::detail::unit_cache::shared_chunk_cache;

namespace {

constexpr std::size_t chunk = 1024;

// Fills a chunk with bytes that name it: byte i of chunk k is (k * 31 + i) mod 251.
void fill_chunk(std::uint64_t k, std::span<std::byte> out) {
  for (std::size_t i = 0; i < out.size(); ++i)
    out[i] = static_cast<std::byte>((k * 31 + i) % 251);
}
bool holds_chunk(std::uint64_t k, const std::byte* p) {
  for (std::size_t i = 0; i < chunk; ++i)
    if (p[i] != static_cast<std::byte>((k * 31 + i) % 251)) return false;
  return true;
}

// Reads chunk k (group k / 4: four chunks a band) once, as a record does; counts decodes.
bool read_once(shared_chunk_cache& c, std::uint64_t k, std::uint64_t users,
               std::atomic<int>& decodes) {
  const auto p = c.get(k / 4, k, chunk, users, [&](std::span<std::byte> out) {
    decodes.fetch_add(1);
    fill_chunk(k, out);
  });
  return holds_chunk(k, p.data());
}

}  // namespace

TEST_CASE("a chunk read by all its users is decoded once, its bytes intact") {
  shared_chunk_cache c(64 * chunk);
  std::atomic<int> decodes{0};
  for (int user = 0; user < 3; ++user)
    for (std::uint64_t k = 0; k < 16; ++k) CHECK(read_once(c, k, 3, decodes));
  CHECK(decodes == 16);
  const auto s = c.stats();
  CHECK(s.chunks_decoded == 16);
  CHECK(s.decoded_bytes == 16 * chunk);
  CHECK(s.cache_hits == 32);
  CHECK(s.cache_peak_bytes == 16 * chunk);
  CHECK(s.uncached_decodes == 0);
  CHECK(c.held_bytes() == 16 * chunk);
  c.drop_unused();
  CHECK(c.held_bytes() == 0);
}

TEST_CASE("spent chunks make room first: open chunks survive a budget of exactly the open ones") {
  // 8 chunks fit. Chunks 0-3 are open (2 users, read once); chunks 100-199 stream through with
  // one user each (spent at once). The open ones must never be evicted, whichever stripe the
  // streaming chunks land in.
  shared_chunk_cache c(8 * chunk);
  std::atomic<int> decodes{0};
  for (std::uint64_t k = 0; k < 4; ++k) CHECK(read_once(c, k, 2, decodes));
  for (std::uint64_t k = 100; k < 200; ++k) CHECK(read_once(c, k, 1, decodes));
  CHECK(c.held_bytes() <= 8 * chunk);
  CHECK(decodes == 104);
  for (std::uint64_t k = 0; k < 4; ++k) CHECK(read_once(c, k, 2, decodes));
  CHECK(decodes == 104);  // the second reads of chunks 0-3 were hits
  const auto s = c.stats();
  CHECK(s.cache_peak_bytes <= 8 * chunk);
  CHECK(s.uncached_decodes == 0);
}

TEST_CASE("the most recently spent chunk makes room first (its buffer is the warmest)") {
  // Chunks 0-3 (one band, one stripe) fill the budget and are spent in that order; chunk 4
  // evicts 3, the newest spent, and 0-2 stay cached.
  shared_chunk_cache c(4 * chunk);
  std::atomic<int> decodes{0};
  for (std::uint64_t k = 0; k < 4; ++k) CHECK(read_once(c, k, 1, decodes));
  CHECK(read_once(c, 4, 1, decodes));
  CHECK(decodes == 5);
  for (std::uint64_t k = 0; k < 3; ++k) CHECK(read_once(c, k, 1, decodes));
  CHECK(decodes == 5);  // hits
  CHECK(read_once(c, 3, 1, decodes));
  CHECK(decodes == 6);  // 3 was the one evicted
  CHECK(c.stats().uncached_decodes == 0);
  CHECK(c.held_bytes() == 4 * chunk);
}

TEST_CASE("with every chunk pinned, a new chunk is decoded outside the cache, not cached") {
  shared_chunk_cache c(2 * chunk);
  std::atomic<int> decodes{0};
  auto decode_as = [&](std::uint64_t k) {
    return [&decodes, k](std::span<std::byte> out) {
      decodes.fetch_add(1);
      fill_chunk(k, out);
    };
  };
  const auto a = c.get(0, 0, chunk, 5, decode_as(0));
  const auto b = c.get(1, 1, chunk, 5, decode_as(1));
  {
    const auto x = c.get(2, 2, chunk, 5, decode_as(2));  // no room: a and b are pinned
    CHECK(holds_chunk(2, x.data()));
  }
  CHECK(c.stats().uncached_decodes == 1);
  CHECK(c.held_bytes() == 2 * chunk);
  CHECK(holds_chunk(0, a.data()));
  CHECK(holds_chunk(1, b.data()));
  // decode ahead takes only free room and spent chunks: none here
  CHECK_FALSE(c.decode_ahead(3, 3, chunk, 1, decode_as(3), [] { return true; }));
  CHECK(c.held_bytes() == 2 * chunk);
}

TEST_CASE("a failed decode caches nothing, gives its bytes back, and the next reader decodes") {
  shared_chunk_cache c(4 * chunk);
  CHECK_THROWS_AS(c.get(0, 7, chunk, 1,
                        [](std::span<std::byte>) { throw std::runtime_error("corrupt"); }),
                  std::runtime_error);
  CHECK(c.held_bytes() == 0);
  std::atomic<int> decodes{0};
  CHECK(read_once(c, 7, 1, decodes));
  CHECK(decodes == 1);
}

TEST_CASE("pin_ready pins a band's ready chunks under its lock and unpin_ready counts reads") {
  shared_chunk_cache c(16 * chunk);
  std::atomic<int> decodes{0};
  for (std::uint64_t k = 0; k < 4; k += 2) CHECK(read_once(c, k, 3, decodes));  // 0 and 2
  for (std::uint64_t k = 10; k < 24; ++k) CHECK(read_once(c, k, 2, decodes));  // full
  const std::vector<std::uint64_t> groups{0, 0, 0, 0}, keys{0, 1, 2, 3};
  std::vector<const std::byte*> out(4);
  c.pin_ready(groups, keys, out);
  CHECK(out[0] != nullptr);
  CHECK(out[1] == nullptr);
  CHECK(out[2] != nullptr);
  CHECK(out[3] == nullptr);
  CHECK(holds_chunk(2, out[2]));
  // one more read of each while pinned: 3 reads of 3 users, spent, and the most recently used
  c.unpin_ready(groups, keys, out, 1);
  CHECK(c.stats().cache_hits == 4);
  // two new chunks evict the spent 0 and 2, not the least recently used open 10 and 11
  for (std::uint64_t k = 24; k < 26; ++k) CHECK(read_once(c, k, 2, decodes));
  CHECK(decodes == 18);
  for (std::uint64_t k = 10; k < 26; ++k) CHECK(read_once(c, k, 2, decodes));
  CHECK(decodes == 18);
  CHECK(read_once(c, 0, 3, decodes));
  CHECK(decodes == 19);
  CHECK(c.stats().uncached_decodes == 0);
  CHECK(c.held_bytes() <= 16 * chunk);
}

TEST_CASE("many threads over few chunks: each decoded once, every byte right, budget kept") {
  // 8 threads each read all 64 chunks (8 users per chunk) in a different rotation, so decodes of
  // one chunk race; the budget holds all of them.
  constexpr int threads = 8;
  constexpr std::uint64_t chunks = 64;
  shared_chunk_cache c(chunks * chunk);
  std::atomic<int> decodes{0}, wrong{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t)
    ts.emplace_back([&, t] {
      for (std::uint64_t i = 0; i < chunks; ++i) {
        const std::uint64_t k = (i + static_cast<std::uint64_t>(t) * 7) % chunks;
        if (!read_once(c, k, threads, decodes)) wrong.fetch_add(1);
      }
    });
  for (auto& t : ts) t.join();
  CHECK(wrong == 0);
  CHECK(decodes == static_cast<int>(chunks));
  const auto s = c.stats();
  CHECK(s.chunks_decoded == chunks);
  CHECK(s.cache_hits == chunks * (threads - 1));
  CHECK(s.cache_peak_bytes <= chunks * chunk);
}

TEST_CASE("many threads streaming through a small budget: bytes right, budget never exceeded") {
  constexpr int threads = 6;
  shared_chunk_cache c(12 * chunk);
  std::atomic<int> decodes{0}, wrong{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t)
    ts.emplace_back([&, t] {
      for (std::uint64_t k = 0; k < 2000; ++k) {
        const std::uint64_t key = k * threads + static_cast<std::uint64_t>(t);  // own chunks
        if (!read_once(c, key, 1, decodes)) wrong.fetch_add(1);
        if (c.held_bytes() > 12 * chunk) wrong.fetch_add(1);
      }
    });
  for (auto& t : ts) t.join();
  CHECK(wrong == 0);
  CHECK(decodes == threads * 2000);
  CHECK(c.stats().cache_peak_bytes <= 12 * chunk);
  CHECK(c.stats().uncached_decodes == 0);  // spent chunks always make room
}

TEST_CASE("forget_unused keeps the buffers for the next decodes; drop_unused frees them") {
  shared_chunk_cache c(4 * chunk);
  std::atomic<int> decodes{0};
  std::vector<const std::byte*> first;
  for (std::uint64_t k = 0; k < 4; ++k) {
    const auto p = c.get(k, k, chunk, 1, [&](std::span<std::byte> out) { fill_chunk(k, out); });
    first.push_back(p.data());
  }
  c.forget_unused();
  CHECK(c.held_bytes() == 4 * chunk);  // spare buffers stay counted
  // the same chunks decode again (forgotten), into the same four buffers
  for (std::uint64_t k = 0; k < 4; ++k) {
    const auto p = c.get(k, k, chunk, 1, [&](std::span<std::byte> out) {
      decodes.fetch_add(1);
      fill_chunk(k, out);
    });
    CHECK(holds_chunk(k, p.data()));
    CHECK(std::find(first.begin(), first.end(), p.data()) != first.end());
  }
  CHECK(decodes == 4);
  CHECK(c.held_bytes() == 4 * chunk);
  CHECK(c.stats().cache_peak_bytes == 4 * chunk);
  c.forget_unused();
  // a chunk of another size frees spare buffers to make room, and the budget holds
  {
    const auto p = c.get(9, 9, 3 * chunk, 1, [](std::span<std::byte> out) {
      std::memset(out.data(), 7, out.size());
    });
    CHECK(p.data()[3 * chunk - 1] == std::byte{7});
  }
  CHECK(c.held_bytes() == 4 * chunk);
  CHECK(c.stats().uncached_decodes == 0);
  c.drop_unused();
  CHECK(c.held_bytes() == 0);
}

TEST_CASE("decodes outside the budget run one at a time: never a copy per reader") {
  shared_chunk_cache c(chunk);
  std::atomic<int> decodes{0};
  const auto held = c.get(0, 0, chunk, 5, [&](std::span<std::byte> out) {  // fills the budget
    decodes.fetch_add(1);
    fill_chunk(0, out);
  });
  std::atomic<int> active{0}, most{0}, wrong{0};
  std::vector<std::thread> readers;
  for (std::uint64_t k = 1; k <= 4; ++k)
    readers.emplace_back([&, k] {
      const auto p = c.get(k, k, chunk, 1, [&](std::span<std::byte> out) {
        const int now = active.fetch_add(1) + 1;
        for (int m = most.load(); now > m && !most.compare_exchange_weak(m, now);) {
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(30));
        fill_chunk(k, out);
        active.fetch_sub(1);
      });
      if (!holds_chunk(k, p.data())) wrong.fetch_add(1);
    });
  for (auto& t : readers) t.join();
  CHECK(most.load() == 1);
  CHECK(wrong.load() == 0);
  CHECK(c.stats().uncached_decodes == 4);
  CHECK(c.held_bytes() == chunk);
  CHECK(holds_chunk(0, held.data()));
}
