// gpufeed — one ranged GET: bytes [offset, offset + n) of a URL, written straight into the
// caller's buffers, the answer checked before a byte of it lands there.
//
// The checks, made at the first body byte (the headers are complete then) and again after the
// transfer when no body came:
//  - 206 with a Content-Range that starts at the offset asked and ends at or before the last
//    byte asked; the body is bounded by it (a byte more is an error, never a write past the
//    buffer). An answer that ends earlier is a short read the seam continues.
//  - the object is still the one opened: its total size (Content-Range), its ETag, or, when it
//    had no ETag, its Last-Modified. The request also asks the server to check (If-Match with a
//    strong ETag, If-Unmodified-Since when there is no ETag), which a server that keeps to the standard answers
//    with 412; both ways the read fails as "changed", never mixing two versions' bytes.
//  - 200 means the server ignored Range: the transfer is stopped at its first byte, never read
//    whole. (A 200 without a body, Content-Length 0, is an empty object, which has no range to
//    serve: nginx answers so. Opening accepts it, as it accepts 416 with "bytes */0"; a read
//    meeting it finds the object changed.)
// Any other answer's body (an error page, S3's XML) never reaches the caller's buffers; its
// first bytes name the store's error code.
#pragma once

#include <curl/curl.h>
#include <sys/uio.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <optional>
#include <string>
#include <string_view>

#include "gpufeed/detail/remote/curl_handle.hpp"
#include "gpufeed/detail/remote/http_request.hpp"
#include "gpufeed/detail/remote/response_check.hpp"
#include "gpufeed/detail/remote/transfer_stats.hpp"

namespace gpufeed::detail::remote {

class ranged_get {
 public:
  // One GET of [offset, offset + n) (n > 0) of `url` on handle h into `count` buffers holding n
  // bytes at least. `expect`: the object as opened (null when opening it: the answer's size and
  // validators are then only reported). Never throws; counts the request in `stats`.
  static get_result run(CURL* h, const std::string& url, const http_options& o,
                        std::uint64_t offset, std::size_t n, const iovec* parts,
                        std::size_t count, const object_identity* expect,
                        transfer_counters& stats) noexcept {
    try {
      ranged_get g(h, offset, n, parts, count, expect);
      return g.perform(url, o, stats);
    } catch (const std::exception& e) {  // out of memory (the signer's own are caught inside)
      get_result r;
      r.err = ENOMEM;
      r.why = std::string("the request could not be made: ") + e.what();
      return r;
    }
  }

 private:
  enum class verdict : unsigned char { unchecked, accept, empty, error_answer, reject };

  ranged_get(CURL* h, std::uint64_t offset, std::size_t n, const iovec* parts, std::size_t count,
             const object_identity* expect) noexcept
      : h_(h), offset_(offset), n_(n), parts_(parts), count_(count), expect_(expect) {}

  // Keeps the headers the checks read, of the last answer only (a status line starts another:
  // 100 Continue, or a proxy's answer before the server's).
  static std::size_t on_header(char* data, std::size_t size, std::size_t nmemb,
                               void* self) noexcept {
    auto& g = *static_cast<ranged_get*>(self);
    const std::string_view line(data, size * nmemb);
    try {
      if (line.substr(0, 5) == "HTTP/") {
        g.content_range_.clear();
        g.content_length_.clear();
        g.result_.etag.clear();
        g.result_.last_modified.clear();
        return line.size();
      }
      const auto colon = line.find(':');
      if (colon == std::string_view::npos) return line.size();
      std::string name(line.substr(0, colon));
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      std::string_view value = line.substr(colon + 1);
      while (!value.empty() && (value.front() == ' ' || value.front() == '\t'))
        value.remove_prefix(1);
      while (!value.empty() && (value.back() == '\r' || value.back() == '\n' ||
                                value.back() == ' ' || value.back() == '\t'))
        value.remove_suffix(1);
      if (name == "content-range") g.content_range_ = value;
      else if (name == "content-length") g.content_length_ = value;
      else if (name == "etag") g.result_.etag = value;
      else if (name == "last-modified") g.result_.last_modified = value;
    } catch (...) {  // out of memory: the checks then miss a header and refuse the answer
    }
    return line.size();
  }

  // Called once the answer's headers are in: may its body go into the caller's buffers?
  void check_headers() {
    long status = 0;
    (void)curl_easy_getinfo(h_, CURLINFO_RESPONSE_CODE, &status);
    result_.status = status;
    const std::string& cr = content_range_;
    if (!cr.empty()) result_.range = parse_content_range(cr);
    if (status == 200 && content_length_ == "0") {  // an empty object: no range to serve
      if (expect_) return changed("it is empty now");
      verdict_ = verdict::empty;
      return;
    }
    if (status == 200) {
      return reject(EOPNOTSUPP, "the server ignored the Range header (HTTP 200 to a ranged GET): "
                                "it supports no range requests, and the whole object is not read");
    }
    if (status != 206) {
      verdict_ = verdict::error_answer;
      return;
    }
    const content_range* r = result_.range ? &*result_.range : nullptr;
    const std::uint64_t last = offset_ + n_ - 1;
    if (!r || !r->satisfied)
      return reject(EPROTO, "HTTP 206 without a valid Content-Range ('" + cr + "')");
    if (r->first != offset_ || r->last > last)
      return reject(EPROTO, "the server answered Content-Range '" + cr + "' to a request for bytes " +
                                std::to_string(offset_) + "-" + std::to_string(last));
    if (expect_) {
      if (r->total && *r->total != expect_->size)
        return changed("its size is now " + std::to_string(*r->total) + " bytes, " +
                       std::to_string(expect_->size) + " when it was opened");
      if (!expect_->etag.empty() && !result_.etag.empty() && result_.etag != expect_->etag)
        return changed("ETag " + expect_->etag + " when it was opened, now " + result_.etag);
      if (expect_->etag.empty() && !expect_->last_modified.empty() &&
          !result_.last_modified.empty() && result_.last_modified != expect_->last_modified)
        return changed("Last-Modified '" + expect_->last_modified + "' when it was opened, now '" +
                       result_.last_modified + "'");
    }
    limit_ = static_cast<std::size_t>(r->last - r->first + 1);
    verdict_ = verdict::accept;
  }

  void reject(int err, std::string why) {
    verdict_ = verdict::reject;
    result_.err = err;
    result_.why = std::move(why);
  }
  void changed(const std::string& how) {
    reject(ESTALE, "the object changed during reading (" + how + ")");
  }

  static std::size_t on_body(char* data, std::size_t size, std::size_t nmemb, void* self) noexcept {
    auto& g = *static_cast<ranged_get*>(self);
    const std::size_t n = size * nmemb;
    try {
      if (g.verdict_ == verdict::unchecked) g.check_headers();
    } catch (...) {  // out of memory reading a header
      g.reject(ENOMEM, "out of memory checking the answer");
    }
    if (g.verdict_ == verdict::accept) {
      if (n > g.limit_ - g.written_) {
        g.reject(EPROTO, "the server sent more bytes than its Content-Range (" +
                             std::to_string(g.limit_) + ")");
        return 0;  // stops the transfer: CURLE_WRITE_ERROR
      }
      std::size_t done = 0;
      while (done < n) {  // into the buffers in order; they hold n_ >= limit_ bytes
        const iovec& p = g.parts_[g.part_];
        const std::size_t take = std::min(n - done, p.iov_len - g.in_part_);
        std::memcpy(static_cast<char*>(p.iov_base) + g.in_part_, data + done, take);
        done += take;
        g.in_part_ += take;
        if (g.in_part_ == p.iov_len && g.part_ + 1 < g.count_) {
          ++g.part_;
          g.in_part_ = 0;
        }
      }
      g.written_ += n;
      return n;
    }
    if (g.verdict_ == verdict::error_answer) {  // an error's body: its start names the cause
      if (g.error_body_.size() < 1024)
        g.error_body_.append(data, std::min<std::size_t>(n, 1024 - g.error_body_.size()));
      g.error_bytes_ += n;
      return g.error_bytes_ > (std::size_t{1} << 20) ? 0 : n;  // a huge error page: stop it
    }
    return 0;  // rejected: stop before a byte of it is kept
  }

  get_result perform(const std::string& url, const http_options& o, transfer_counters& stats) {
    http_request req{"GET", url, {}};
    req.headers.push_back({"Range", "bytes=" + std::to_string(offset_) + "-" +
                                        std::to_string(offset_ + n_ - 1)});
    if (expect_ && strong_etag(expect_->etag))
      req.headers.push_back({"If-Match", expect_->etag});
    else if (expect_ && expect_->etag.empty() && !expect_->last_modified.empty())
      req.headers.push_back({"If-Unmodified-Since", expect_->last_modified});
    if (o.signer) {
      try {
        o.signer(req);
      } catch (const std::exception& e) {
        result_.err = EACCES;
        result_.why = std::string("signing the request failed: ") + e.what();
        return result_;
      }
    }
    header_list lines;
    for (const http_header& hd : req.headers) {
      if (!lines.add(hd.name, hd.value)) {
        result_.err = ENOMEM;
        result_.why = "out of memory building the request";
        return result_;
      }
    }
    char errbuf[CURL_ERROR_SIZE] = {};
    (void)curl_easy_setopt(h_, CURLOPT_URL, req.url.c_str());
    (void)curl_easy_setopt(h_, CURLOPT_HTTPHEADER, lines.get());
    (void)curl_easy_setopt(h_, CURLOPT_WRITEFUNCTION, &ranged_get::on_body);
    (void)curl_easy_setopt(h_, CURLOPT_WRITEDATA, this);
    (void)curl_easy_setopt(h_, CURLOPT_HEADERFUNCTION, &ranged_get::on_header);
    (void)curl_easy_setopt(h_, CURLOPT_HEADERDATA, this);
    (void)curl_easy_setopt(h_, CURLOPT_ERRORBUFFER, errbuf);
    const auto start = std::chrono::steady_clock::now();
    const CURLcode rc = curl_easy_perform(h_);
    stats.request(std::chrono::steady_clock::now() - start);
    // Nothing of this request may outlive it in the handle.
    (void)curl_easy_setopt(h_, CURLOPT_HTTPHEADER, static_cast<curl_slist*>(nullptr));
    (void)curl_easy_setopt(h_, CURLOPT_WRITEDATA, static_cast<void*>(nullptr));
    (void)curl_easy_setopt(h_, CURLOPT_HEADERDATA, static_cast<void*>(nullptr));
    (void)curl_easy_setopt(h_, CURLOPT_ERRORBUFFER, static_cast<char*>(nullptr));
    return conclude(rc, errbuf);
  }

  get_result conclude(CURLcode rc, const char* errbuf) {
    using kind = get_result::kind;
    if (verdict_ == verdict::unchecked) {  // no body came: check what did
      long status = 0;
      (void)curl_easy_getinfo(h_, CURLINFO_RESPONSE_CODE, &status);
      if (status != 0) check_headers();
    }
    if (verdict_ == verdict::reject) return finish(kind::failed);
    if (verdict_ == verdict::empty && rc == CURLE_OK) {  // opening an empty object
      result_.range = content_range{false, 0, 0, 0};
      return finish(kind::done);
    }
    if (rc != CURLE_OK && verdict_ != verdict::error_answer) {
      const failure_kind k = classify_curl(rc);
      if (verdict_ == verdict::accept && written_ > 0 && k.transient) {
        result_.got = written_;  // checked bytes before the cut: a short read
        return finish(kind::done);
      }
      result_.err = k.err;
      result_.why = std::string(curl_easy_strerror(rc)) + (*errbuf ? std::string(": ") + errbuf : "");
      return finish(k.transient ? kind::transient : kind::failed);
    }
    if (verdict_ == verdict::accept) {
      if (written_ > 0) {
        result_.got = written_;
        return finish(kind::done);
      }
      result_.err = ECONNRESET;
      result_.why = "HTTP 206 with an empty body";
      return finish(kind::transient);
    }
    const long status = result_.status;
    if (status == 416) {
      const content_range* r = result_.range ? &*result_.range : nullptr;
      if (!expect_ && r && !r->satisfied && r->total == 0) return finish(kind::done);  // empty
      result_.err = expect_ ? ESTALE : EIO;
      result_.why = expect_ ? "the object changed during reading (HTTP 416: it is shorter now)"
                            : status_text(status);
      return finish(kind::failed);
    }
    const failure_kind k = classify_status(status);
    result_.err = k.err;
    result_.why = status_text(status, s3_error_code(error_body_));
    if (status == 412) result_.why = "the object changed during reading: " + result_.why;
    if (status >= 300 && status < 400) result_.why += ": redirects are not followed";
    return finish(k.transient ? kind::transient : kind::failed);
  }

  get_result finish(get_result::kind k) {
    result_.what = k;
    return std::move(result_);
  }

  CURL* h_;
  std::uint64_t offset_;
  std::size_t n_;
  const iovec* parts_;
  std::size_t count_;
  const object_identity* expect_;
  verdict verdict_ = verdict::unchecked;
  std::size_t limit_ = 0;    // body bytes the checked Content-Range allows
  std::size_t written_ = 0;  // body bytes written into the buffers
  std::size_t part_ = 0, in_part_ = 0;
  std::string content_range_;   // the last answer's Content-Range header
  std::string content_length_;  // and its Content-Length
  std::string error_body_;
  std::size_t error_bytes_ = 0;
  get_result result_;
};

}  // namespace gpufeed::detail::remote
