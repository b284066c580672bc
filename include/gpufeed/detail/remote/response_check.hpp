// gpufeed — what an HTTP answer means to a ranged read: the Content-Range it names, what one
// request came to (get_result), whether a failure is worth another attempt, and the errno that
// stands for it at the byte-source seam (detail/io/byte_source.hpp carries an errno, not an HTTP
// status).
//
//   transient (tried again): timeouts (ETIMEDOUT), refused connections (ECONNREFUSED), resets,
//     truncated or empty answers, HTTP/2 stream errors (ECONNRESET), names that did not resolve
//     (EHOSTUNREACH); HTTP 408 (ETIMEDOUT), 429 and 503 (EAGAIN: the server sheds load, S3's
//     SlowDown), other 5xx (EIO).
//   final: 404 and 410 (ENOENT), 401 and 403 (EACCES), 412 (ESTALE: the object changed since it
//     was opened), 200 to a ranged GET (EOPNOTSUPP: the server ignores ranges), redirects (not
//     followed: EIO), other 4xx (EIO), TLS verification (EPROTO), anything else libcurl reports.
#pragma once

#include <curl/curl.h>

#include <cerrno>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace gpufeed::detail::remote {

// A Content-Range header's value: "bytes FIRST-LAST/TOTAL" (satisfied), "bytes */TOTAL" (an
// unsatisfiable range's answer); TOTAL may be "*" (unknown).
struct content_range {
  bool satisfied = false;
  std::uint64_t first = 0;
  std::uint64_t last = 0;
  std::optional<std::uint64_t> total;
};

inline std::optional<std::uint64_t> parse_decimal(std::string_view s) {
  std::uint64_t v = 0;
  if (s.empty()) return std::nullopt;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

// The Content-Range `v`, or nullopt when it is not one of the forms above (or FIRST > LAST, or
// LAST >= TOTAL).
inline std::optional<content_range> parse_content_range(std::string_view v) {
  auto trim = [](std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r' ||
                          s.back() == '\n'))
      s.remove_suffix(1);
    return s;
  };
  v = trim(v);
  if (v.substr(0, 6) != "bytes ") return std::nullopt;
  v = trim(v.substr(6));
  const auto slash = v.find('/');
  if (slash == std::string_view::npos) return std::nullopt;
  const std::string_view range = v.substr(0, slash), total = v.substr(slash + 1);
  content_range r;
  if (total != "*") {
    r.total = parse_decimal(total);
    if (!r.total) return std::nullopt;
  }
  if (range == "*") return r.total ? std::optional<content_range>(r) : std::nullopt;
  const auto dash = range.find('-');
  if (dash == std::string_view::npos) return std::nullopt;
  const auto first = parse_decimal(range.substr(0, dash));
  const auto last = parse_decimal(range.substr(dash + 1));
  if (!first || !last || *first > *last || (r.total && *last >= *r.total)) return std::nullopt;
  r.satisfied = true;
  r.first = *first;
  r.last = *last;
  return r;
}

// A strong entity tag ("..."), which If-Match may name; a weak one (W/"...") never matches
// If-Match, so it is compared with the response's own ETag instead.
inline bool strong_etag(std::string_view etag) {
  return etag.size() >= 2 && etag.front() == '"' && etag.back() == '"';
}

// S3's error code from an error response's XML body ("SlowDown", "NoSuchKey"), or "".
inline std::string s3_error_code(std::string_view body) {
  const auto open = body.find("<Code>");
  if (open == std::string_view::npos) return {};
  const auto from = open + 6;
  const auto close = body.find("</Code>", from);
  if (close == std::string_view::npos || close - from > 64) return {};
  return std::string(body.substr(from, close - from));
}

// What the object was when it was opened; reads ask for that version and check they got it.
struct object_identity {
  std::uint64_t size = 0;
  std::string etag;           // "" when the server sent none
  std::string last_modified;  // "" when the server sent none
};

// What one request came to.
struct get_result {
  enum class kind : unsigned char {
    done,       // got bytes (1 .. n) of the range, checked; or, opening, an empty object
    transient,  // worth another attempt (retry.hpp)
    failed,     // final
  };
  kind what = kind::failed;
  std::size_t got = 0;
  int err = 0;       // the errno standing for a failure (below)
  long status = 0;   // the HTTP status, 0 when none came
  std::string why;   // what went wrong, for the error message (no URL, no secret)
  std::optional<content_range> range;  // the answer's Content-Range, when it had one
  std::string etag, last_modified;     // the answer's
};

struct failure_kind {
  int err = EIO;
  bool transient = false;
};

// A libcurl failure (not CURLE_OK, not the write callback's own abort).
inline failure_kind classify_curl(CURLcode c) noexcept {
  switch (c) {
    case CURLE_OPERATION_TIMEDOUT: return {ETIMEDOUT, true};
    case CURLE_COULDNT_CONNECT: return {ECONNREFUSED, true};
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY: return {EHOSTUNREACH, true};
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_WEIRD_SERVER_REPLY: return {ECONNRESET, true};
    case CURLE_OUT_OF_MEMORY: return {ENOMEM, false};
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_CERTPROBLEM: return {EPROTO, false};
    default: return {EIO, false};
  }
}

// An HTTP status other than 206 to a ranged GET.
inline failure_kind classify_status(long status) noexcept {
  switch (status) {
    case 408: return {ETIMEDOUT, true};
    case 429:
    case 503: return {EAGAIN, true};
    case 404:
    case 410: return {ENOENT, false};
    case 401:
    case 403: return {EACCES, false};
    case 412: return {ESTALE, false};
    case 200: return {EOPNOTSUPP, false};
    default: return {EIO, status >= 500 && status <= 599};
  }
}

// "HTTP 404 (Not Found)" for the statuses a read meets; "HTTP N" for others. `code`: the
// store's error code (S3's <Code>) when it sent one, shown after the reason.
inline std::string status_text(long status, const std::string& code = std::string()) {
  const char* reason = nullptr;
  switch (status) {
    case 200: reason = "OK"; break;
    case 206: reason = "Partial Content"; break;
    case 400: reason = "Bad Request"; break;
    case 401: reason = "Unauthorized"; break;
    case 403: reason = "Forbidden"; break;
    case 404: reason = "Not Found"; break;
    case 408: reason = "Request Timeout"; break;
    case 410: reason = "Gone"; break;
    case 412: reason = "Precondition Failed"; break;
    case 416: reason = "Range Not Satisfiable"; break;
    case 429: reason = "Too Many Requests"; break;
    case 500: reason = "Internal Server Error"; break;
    case 502: reason = "Bad Gateway"; break;
    case 503: reason = "Service Unavailable"; break;
    case 504: reason = "Gateway Timeout"; break;
    default: break;
  }
  std::string s = "HTTP " + std::to_string(status);
  if (reason || !code.empty()) {
    s += " (";
    if (reason) s += reason;
    if (reason && !code.empty()) s += ", ";
    s += code;
    s += ")";
  }
  return s;
}

}  // namespace gpufeed::detail::remote
