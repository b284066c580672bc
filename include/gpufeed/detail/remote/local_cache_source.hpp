// gpufeed — a byte source that reads a remote object through the node-local cache
// (local_cache.hpp): the layer between a shard's reads and its http_file (the seam:
// detail/io/byte_source.hpp).
//
// A read is served from the block its offset lies in (the seam continues a read that spans
// blocks into the next): from the cached block when the cache holds it intact, else the whole
// block is fetched from the object with one read of the object (a ranged GET), stored, and the
// read served from the fetched bytes. Threads of this source that want the same missing block
// at once wait for one fetch rather than each making their own. Processes sharing the cache
// directory may fetch a block twice at once; one stored copy remains.
//
// While the cache declines new blocks (local_cache::admits: its budget is full of blocks being
// read, the object's own among them), a read the cache cannot serve is read from the object as
// asked, with one request up to the first later block the cache holds: no whole blocks fetched
// that would not be kept. The source marks its object as being read for its lifetime, so the
// cache never evicts the object's blocks to store others of the data being read.
//
// A block that fails its checksum is dropped and fetched again (cache_stats::corrupt). A failed
// fetch is the object's failure, reported as the object reported it (the http_file's api text:
// the request and what happened). size(), name(), close() and reopen() are the object's.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "gpufeed/detail/io/byte_source.hpp"
#include "gpufeed/detail/remote/http_file.hpp"
#include "gpufeed/detail/remote/local_cache.hpp"

namespace gpufeed::detail::remote {

class local_cache_source final : public io::byte_source {
 public:
  // Reads `object`, which the URL `url` names, through `cache`. `validator` identifies this
  // version of the object (its ETag, else its Last-Modified; never empty: an object without one
  // is not cached). Drops the cached blocks of the object's other versions.
  local_cache_source(std::unique_ptr<io::byte_source> object, const std::string& url,
                     const std::string& validator, std::shared_ptr<local_cache> cache)
      : object_(std::move(object)),
        cache_(std::move(cache)),
        key_(make_cache_key(cache_key_url(url), validator, object_->size())),
        block_(cache_->config().block_bytes) {
    cache_->forget_other_versions(key_);
    cache_->reading(key_);
  }
  local_cache_source(const local_cache_source&) = delete;
  local_cache_source& operator=(const local_cache_source&) = delete;
  ~local_cache_source() override { cache_->done_reading(key_); }

  [[nodiscard]] std::uint64_t size() const noexcept override { return object_->size(); }
  [[nodiscard]] const std::string& name() const noexcept override { return object_->name(); }
  void close() noexcept override { object_->close(); }
  void reopen() override { object_->reopen(); }

  // The object read through the cache (its own counters: an http_file's transfer_stats).
  [[nodiscard]] const io::byte_source& object() const noexcept { return *object_; }
  // What the cache did for this source's reads (evictions and invalidations are the cache's:
  // cache().stats(), shared by every source of the process that uses the directory).
  [[nodiscard]] cache_stats stats() const noexcept { return counters_.snapshot(); }
  [[nodiscard]] const local_cache& cache() const noexcept { return *cache_; }
  [[nodiscard]] const cache_key& key() const noexcept { return key_; }

  // Reads up to n bytes from `offset` on that the cache holds intact, never fetching: the bytes
  // read (0 when the block `offset` lies in is not held or fails its check, which drops it), up
  // to the first block not held. For readers that fetch what the cache lacks in units of their
  // own (unit_reads), and would otherwise copy held bytes through those units.
  [[nodiscard]] std::size_t read_held(void* dst, std::size_t n,
                                      std::uint64_t offset) const noexcept {
    const std::uint64_t total = object_->size();
    std::size_t done = 0;
    while (done < n && offset < total) {
      const std::uint64_t block = offset / block_;
      const std::uint64_t start = block * block_;
      const auto length =
          static_cast<std::uint32_t>(std::min<std::uint64_t>(block_, total - start));
      const auto at = static_cast<std::size_t>(offset - start);
      const std::size_t k = std::min<std::size_t>(n - done, length - at);
      const local_cache::found f =
          cache_->read(key_, block, total, length, at, static_cast<std::byte*>(dst) + done, k);
      if (f == local_cache::found::corrupt) counters_.add(cache_counters::corrupt);
      if (f != local_cache::found::hit) break;
      counters_.add(cache_counters::hits);
      counters_.add(cache_counters::bytes_local, k);
      done += k;
      offset += k;
    }
    return done;
  }
  // Whether the cache has every block of bytes [offset, offset + n) (advice: local_cache::holds).
  [[nodiscard]] bool holds(std::uint64_t offset, std::uint64_t n) const noexcept {
    return cache_->holds(key_, object_->size(), offset, n);
  }

 protected:
  io::read_attempt read_some(void* dst, std::size_t n, std::uint64_t offset) const noexcept override {
    const std::uint64_t total = object_->size();
    if (offset >= total || n == 0) return {0, 0};
    const std::uint64_t block = offset / block_;
    const std::uint64_t start = block * block_;
    const auto length = static_cast<std::uint32_t>(std::min<std::uint64_t>(block_, total - start));
    const auto at = static_cast<std::size_t>(offset - start);
    const std::size_t n_asked = static_cast<std::size_t>(std::min<std::uint64_t>(n, total - offset));
    n = std::min<std::size_t>(n, length - at);
    switch (cache_->read(key_, block, total, length, at, dst, n)) {
      case local_cache::found::hit:
        counters_.add(cache_counters::hits);
        counters_.add(cache_counters::bytes_local, n);
        return {n, 0};
      case local_cache::found::corrupt:
        counters_.add(cache_counters::corrupt);
        break;
      case local_cache::found::absent:
        break;
    }
    if (!cache_->admits()) return read_uncached(dst, n_asked, offset);
    return fetch(block, length, at, dst, n);
  }
  [[nodiscard]] const char* api(bool /*scatter*/) const noexcept override {
    return last_failure.source == this ? last_failure.text : "remote cache read";
  }

 private:
  // One fetch of a block, which the threads that want it meanwhile wait for.
  struct pending {
    std::mutex m;
    std::condition_variable cv;
    bool done = false;
    std::vector<std::byte> bytes;
    io::read_outcome outcome;
    std::string why;  // the object's api text when the fetch failed
  };

  // Reads [offset, offset + n) from the object itself, up to the first later block the cache
  // holds (those are read from it next): one request, nothing stored.
  io::read_attempt read_uncached(void* dst, std::size_t n, std::uint64_t offset) const noexcept {
    const std::uint64_t total = object_->size();
    std::uint64_t end = offset + n;
    for (std::uint64_t next = (offset / block_ + 1) * block_; next < end; next += block_)
      if (cache_->holds(key_, total, next, 1)) {
        end = next;
        break;
      }
    const auto want = static_cast<std::size_t>(end - offset);
    const io::read_outcome o = object_->try_read(dst, want, offset);
    if (!o.ok() && o.why != io::read_outcome::stop::ended)
      return failed(o.api, "remote cache: reading the object failed", o.err);
    const std::size_t got = o.ok() ? want : static_cast<std::size_t>(o.at - offset);
    if (got > 0) count_fetched(got);
    return {got, 0};
  }

  // Bytes fetched from the object: counted in this source's stats and in the cache's.
  void count_fetched(std::uint64_t bytes) const noexcept {
    counters_.add(cache_counters::misses);
    counters_.add(cache_counters::bytes_fetched, bytes);
    cache_->count_fetch(bytes);
  }
  // A read of the object failed: its api text (`fallback` when it has none) kept for api(),
  // and its error number.
  io::read_attempt failed(const char* why, const char* fallback, int err) const noexcept {
    last_failure.source = this;
    std::snprintf(last_failure.text, sizeof last_failure.text, "%s",
                  why && *why ? why : fallback);
    return {0, err ? err : EIO};
  }

  io::read_attempt fetch(std::uint64_t block, std::uint32_t length, std::size_t at, void* dst,
                         std::size_t n) const noexcept {
    std::shared_ptr<pending> p;
    bool mine = false;
    try {
      const std::lock_guard<std::mutex> lock(m_);
      auto& slot = inflight_[block];
      if (!slot) {
        slot = std::make_shared<pending>();
        mine = true;
      }
      p = slot;
    } catch (...) {
      return {0, ENOMEM};
    }
    if (mine) {
      io::read_outcome o;
      bool stored = false;
      try {
        p->bytes.resize(length);
        // Another thread's fetch may have stored it since this one looked: read it back then.
        stored = cache_->read(key_, block, object_->size(), length, 0, p->bytes.data(), length) ==
                 local_cache::found::hit;
        if (!stored) o = object_->try_read(p->bytes.data(), length, block * block_);
        if (!o.ok()) p->why = o.api;
      } catch (...) {
        o = {io::read_outcome::stop::failed, ENOMEM, "", block * block_};
      }
      if (o.ok() && !stored) {
        count_fetched(length);
        cache_->store(key_, block, object_->size(), p->bytes);
      }
      {
        const std::lock_guard<std::mutex> lock(p->m);
        p->outcome = o;
        p->done = true;
      }
      p->cv.notify_all();
      const std::lock_guard<std::mutex> lock(m_);
      inflight_.erase(block);
    } else {
      std::unique_lock<std::mutex> lock(p->m);
      p->cv.wait(lock, [&] { return p->done; });
    }
    const io::read_outcome& o = p->outcome;
    if (o.ok()) {
      std::memcpy(dst, p->bytes.data() + at, n);
      return {n, 0};
    }
    if (o.why == io::read_outcome::stop::ended) {  // the object ended early: serve what came
      const std::uint64_t got = o.at - block * block_;
      if (got > at) {
        const std::size_t k = std::min<std::size_t>(n, static_cast<std::size_t>(got - at));
        std::memcpy(dst, p->bytes.data() + at, k);
        return {k, 0};
      }
      return {0, 0};
    }
    return failed(p->why.c_str(), "remote cache: fetching a block failed", o.err);
  }

  std::unique_ptr<io::byte_source> object_;
  std::shared_ptr<local_cache> cache_;
  cache_key key_;
  std::uint64_t block_;
  mutable cache_counters counters_;
  mutable std::mutex m_;
  mutable std::unordered_map<std::uint64_t, std::shared_ptr<pending>> inflight_;
};

// What the node-local cache did for the reads of `s` (a URL shard's reader) when it reads
// through one, else nullopt.
[[nodiscard]] inline std::optional<cache_stats> cache_stats_of(const io::byte_source& s) noexcept {
  if (const auto* c = dynamic_cast<const local_cache_source*>(&s)) return c->stats();
  return std::nullopt;
}

// Reads `object` (opened from `url`: http(s):// or s3://) through the cache `config` names (the
// process's shared_local_cache for its directory), or returns it as it is when it has no
// validator (no ETag or Last-Modified: a changed object could not be told from the cached one).
// io_error as local_cache's constructor.
[[nodiscard]] inline std::unique_ptr<io::byte_source> through_local_cache(
    std::unique_ptr<http_file> object, const std::string& url, const cache_config& config) {
  const object_identity& id = object->identity();
  const std::string validator = !id.etag.empty()            ? "etag:" + id.etag
                                : !id.last_modified.empty() ? "lm:" + id.last_modified
                                                            : std::string();
  if (validator.empty()) return object;
  return std::make_unique<local_cache_source>(std::move(object), url, validator,
                                              shared_local_cache(config));
}

}  // namespace gpufeed::detail::remote
