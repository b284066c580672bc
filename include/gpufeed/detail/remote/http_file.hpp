// gpufeed — a byte source over one HTTP(S) object, read with ranged GETs through libcurl (the
// seam: detail/io/byte_source.hpp).
//
// Opening asks for the object's first byte (GET with Range: bytes=0-0) rather than its headers
// (HEAD): the one round trip gives the size (Content-Range's total), the validators (ETag,
// Last-Modified) and the proof that the server honours ranges, and it works where HEAD is
// refused (an S3 URL presigned for GET). A server that answers 200 with a body (it ignores
// ranges) is refused at open; a read never fetches the whole object.
//
// A read is one ranged GET of the bytes asked (clamped to the size at open), its body written by
// libcurl's callback straight into the caller's buffers (scatter reads too), checked before a
// byte lands there (ranged_get.hpp). What the seam sees:
//  - {got}: got checked bytes from the offset; fewer than asked when the server sent a shorter
//    range or the transfer broke after some bytes (the seam continues from there);
//  - {0}: the offset is at or past the size at open (the object ends there);
//  - {0, errno}: a final failure, after the retries of transient ones (retry.hpp): the errno of
//    response_check.hpp (ESTALE: the object changed during reading; ENOENT: it is gone; EACCES:
//    access refused; EOPNOTSUPP: ranges ignored; ETIMEDOUT, ECONNRESET, EAGAIN, EIO once the
//    retries are spent). api() then names the request and what happened, for the seam's
//    io_error: "HTTP GET bytes=A-B: <what happened>", together with the object's URL as the
//    file (scheme, host, path: never a user, password or query, display_url()).
// The retries are the reader's, not the seam's: the seam tries again at once and only for EINTR,
// where a network failure needs a backoff and a bound in time.
//
// Concurrency: reads are const and run from many threads at once. Each takes a libcurl handle
// from the object's pool for the one request (handle_pool.hpp): handles, and their kept-alive
// connections, are reused across requests and threads but never shared by two at once; the
// counters are atomics; everything else is fixed at open. close() and reopen() may not run
// while another thread reads (the seam's rule). The signer is called from every reading thread.
// Connections belong to the object: an open object keeps as many as threads read it at once,
// and close() (shard_lru's max_open_shards) lets them go.
#pragma once

#include <curl/curl.h>
#include <sys/uio.h>

#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <string>
#include <thread>
#include <utility>

#include "gpufeed/detail/io/byte_source.hpp"
#include "gpufeed/detail/remote/curl_handle.hpp"
#include "gpufeed/detail/remote/handle_pool.hpp"
#include "gpufeed/detail/remote/http_request.hpp"
#include "gpufeed/detail/remote/ranged_get.hpp"
#include "gpufeed/detail/remote/retry.hpp"
#include "gpufeed/detail/remote/transfer_stats.hpp"
#include "gpufeed/error.hpp"

namespace gpufeed::detail::remote {

// Sets the options every request of a handle shares (once, on a new handle).
inline void set_fixed_options(CURL* h, const http_options& o) noexcept {
  (void)curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);  // no SIGALRM for timeouts: threads read
  (void)curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
  (void)curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
  (void)curl_easy_setopt(h, CURLOPT_HTTP_VERSION, static_cast<long>(CURL_HTTP_VERSION_2TLS));
#if LIBCURL_VERSION_NUM >= 0x075500  // CURLOPT_PROTOCOLS_STR: libcurl 7.85
  (void)curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
#else
  (void)curl_easy_setopt(h, CURLOPT_PROTOCOLS, static_cast<long>(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
  (void)curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);  // a redirect would escape the signer
  (void)curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
  (void)curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS,
                         static_cast<long>(o.connect_timeout.count()));
  (void)curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, o.low_speed_bytes);
  (void)curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, static_cast<long>(o.low_speed_time.count()));
  (void)curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, static_cast<long>(o.request_timeout.count()));
  (void)curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, o.verify_tls ? 1L : 0L);
  (void)curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, o.verify_tls ? 2L : 0L);
  if (!o.ca_file.empty()) (void)curl_easy_setopt(h, CURLOPT_CAINFO, o.ca_file.c_str());
}

// What the last final failure of a read on this thread said, for the api() call the seam makes
// right after it on the same thread (a thread's own: no lock, no allocation on the failure path).
struct failure_note {
  const void* source = nullptr;
  char text[480] = {};
};
inline thread_local failure_note last_failure;

class http_file final : public io::byte_source {
 public:
  // Opens `url` (http:// or https://): io_error naming the URL, its HTTP status in the message,
  // when the object cannot be read with ranges (404, 403, a server that ignores Range, one that
  // does not say the size) or the server cannot be reached once the retries are spent;
  // library_error when libcurl cannot start.
  explicit http_file(std::string url, http_options options = {})
      : url_(std::move(url)), name_(display_url(url_)), options_(std::move(options)) {
    id_ = probe("cannot open remote object");
  }

  http_file(const http_file&) = delete;
  http_file& operator=(const http_file&) = delete;
  ~http_file() override = default;

  [[nodiscard]] std::uint64_t size() const noexcept override { return id_.size; }
  [[nodiscard]] const std::string& name() const noexcept override { return name_; }
  // The validators the object had when opened (every read asks for that version).
  [[nodiscard]] const object_identity& identity() const noexcept { return id_; }
  [[nodiscard]] transfer_stats stats() const noexcept { return counters_.snapshot(); }

  // will_need is the seam's default (nothing): a read-ahead here would be a request of its own.

  // Closes the pooled handles and their connections; the next read opens new ones.
  void close() noexcept override { pool_.clear(); }
  // Asks for the object again: format_error when it changed since it was first opened (size,
  // ETag or Last-Modified), io_error as the constructor's when it cannot be read now.
  void reopen() override {
    const object_identity now = probe("cannot reopen remote object");
    if (now.size != id_.size || now.etag != id_.etag || now.last_modified != id_.last_modified)
      throw format_error("the remote object changed since it was first opened (" +
                             std::to_string(id_.size) + " bytes, ETag " + shown(id_.etag) +
                             " then; " + std::to_string(now.size) + " bytes, ETag " +
                             shown(now.etag) + " now): reopen the source",
                         file_context(name_));
  }

 protected:
  io::read_attempt read_some(void* dst, std::size_t n, std::uint64_t offset) const noexcept override {
    const iovec part{dst, n};
    return read(&part, 1, n, offset);
  }
  io::read_attempt read_some_scatter(const iovec* parts, std::size_t count,
                                     std::uint64_t offset) const noexcept override {
    std::size_t n = 0;
    for (std::size_t i = 0; i < count; ++i) n += parts[i].iov_len;
    return read(parts, count, n, offset);
  }
  [[nodiscard]] const char* api(bool /*scatter*/) const noexcept override {
    return last_failure.source == this ? last_failure.text : "HTTP GET";
  }

 private:
  static std::string shown(const std::string& etag) { return etag.empty() ? "(none)" : etag; }

  // One ranged GET (its transient failures tried again): see the seam's contract above.
  io::read_attempt read(const iovec* parts, std::size_t count, std::size_t n,
                        std::uint64_t offset) const noexcept {
    if (offset >= id_.size || n == 0) return {0, 0};
    if (n > id_.size - offset) n = static_cast<std::size_t>(id_.size - offset);
    get_result r = attempts(offset, n, parts, count, &id_);
    if (r.what == get_result::kind::done && r.got > 0) {
      counters_.bytes(r.got);
      if (r.got < n) counters_.short_body();
      return {r.got, 0};
    }
    if (r.what == get_result::kind::done) r.err = EPROTO;  // nothing checked: never {0} here
    counters_.failure();
    note(offset, n, r);
    return {0, r.err ? r.err : EIO};
  }

  // Runs one request until it is done or fails for good (the retry policy's bound).
  get_result attempts(std::uint64_t offset, std::size_t n, const iovec* parts, std::size_t count,
                      const object_identity* expect) const noexcept {
    retry_budget budget(options_.retry);
    for (;;) {
      get_result r;
      try {
        bool fresh = false;
        handle_pool::lease h = pool_.take(fresh);
        if (fresh) set_fixed_options(h.get(), options_);
        r = ranged_get::run(h.get(), url_, options_, offset, n, parts, count, expect, counters_);
      } catch (const std::exception& e) {  // no handle to be had
        r.what = get_result::kind::failed;
        r.err = ENOMEM;
        r.why = e.what();
      }
      if (r.what != get_result::kind::transient) return r;
      std::chrono::milliseconds wait{0};
      if (!budget.next(wait)) {
        r.what = get_result::kind::failed;
        r.why += " (after " + std::to_string(budget.failures()) + " attempts)";
        return r;
      }
      counters_.retry();
      std::this_thread::sleep_for(wait);
    }
  }

  void note(std::uint64_t offset, std::size_t n, const get_result& r) const noexcept {
    last_failure.source = this;
    std::snprintf(last_failure.text, sizeof last_failure.text, "HTTP GET bytes=%llu-%llu: %s",
                  static_cast<unsigned long long>(offset),
                  static_cast<unsigned long long>(offset + n - 1), r.why.c_str());
  }

  // The opening request: the object's size and validators, or the io_error `what` says.
  object_identity probe(const std::string& what) const {
    char first = 0;
    const iovec part{&first, 1};
    get_result r = attempts(0, 1, &part, 1, nullptr);
    if (r.what == get_result::kind::done) {
      object_identity id;
      id.etag = r.etag;
      id.last_modified = r.last_modified;
      if (r.range && r.range->total) {
        id.size = *r.range->total;
        return id;
      }
      r.err = EPROTO;
      r.why = "the server does not say the object's size (Content-Range without a total)";
    }
    error_context ctx = os_call_context(name_, "HTTP GET", r.err ? r.err : EIO);
    throw io_error(what + ": " + r.why, std::move(ctx));
  }

  std::string url_;   // as given (its query may hold a signature: never shown)
  std::string name_;  // display_url(url_): what errors name
  http_options options_;
  object_identity id_;
  mutable handle_pool pool_;
  mutable transfer_counters counters_;
};

}  // namespace gpufeed::detail::remote
