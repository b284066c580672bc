// gpufeed — AWS Signature Version 4 for one HTTP request (header-based, "AWS4-HMAC-SHA256").
//
// The steps are AWS's, to the byte:
//   canonical request = method \n canonical URI \n canonical query \n canonical headers \n
//                       signed header names \n payload hash
//     canonical URI: the path as sent, already percent-encoded (for S3 each key segment encoded
//       once and nothing normalised: s3_url.hpp builds it so);
//     canonical query: names and values encoded, sorted by name then value (uri_encoding.hpp);
//     canonical headers: names lower-cased and sorted, each "name:value\n" with the value trimmed
//       and every run of blanks (line folds included) collapsed to one space; values of a name
//       given twice joined by ',' in the order given;
//     payload hash: hex SHA-256 of the body (empty_payload_sha256 for none), or UNSIGNED-PAYLOAD;
//   string to sign = "AWS4-HMAC-SHA256" \n x-amz-date \n scope \n hex SHA-256(canonical request),
//     scope = yyyymmdd/region/service/aws4_request;
//   signing key = HMAC chain "AWS4"+secret -> date -> region -> service -> "aws4_request";
//   Authorization = "AWS4-HMAC-SHA256 Credential=<id>/<scope>, SignedHeaders=<names>,
//     Signature=<hex HMAC of the string to sign>".
// The Authorization value has ", " between its parts, as the test suite's; S3's documentation
// prints it without the spaces, and AWS accepts either.
// The signer adds and signs x-amz-date, x-amz-security-token (temporary credentials) and, when
// asked (S3 wants it on every request), x-amz-content-sha256; the request must then carry the
// values it returns. Time is an argument, so that tests can sign at AWS's published instants.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gpufeed/detail/remote/credentials.hpp"
#include "gpufeed/detail/remote/digest.hpp"
#include "gpufeed/detail/remote/http_request.hpp"
#include "gpufeed/detail/remote/uri_encoding.hpp"
#include "gpufeed/error.hpp"

namespace gpufeed::detail::remote {

// The SHA-256 of an empty body: the payload hash of a GET.
inline constexpr std::string_view empty_payload_sha256 =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
// The payload hash S3 accepts instead of a body's hash (the body then goes unsigned).
inline constexpr std::string_view unsigned_payload = "UNSIGNED-PAYLOAD";

// What is signed: every header given is signed (Host among them; leave out those a proxy may
// rewrite, such as User-Agent).
struct request_to_sign {
  std::string method = "GET";
  std::string canonical_uri = "/";   // as sent: percent-encoded
  std::vector<query_param> query;    // decoded names and values
  std::vector<http_header> headers;  // must include Host; names in any case
  std::string payload_hash = std::string(empty_payload_sha256);
};

struct signing_scope {
  std::string region;   // "us-east-1"
  std::string service;  // "s3"
};

struct signing_options {
  // Sign and send x-amz-content-sha256 (the payload hash): S3 requires it; AWS's generic test
  // suite signs without it.
  bool content_sha256_header = true;
};

// A signed request's steps and the headers it must carry.
struct sigv4_signature {
  std::string canonical_request;
  std::string string_to_sign;
  std::string signature;      // lower-case hex
  std::string authorization;  // the Authorization header's value
  // Headers the signer added, to send with the request as they are: x-amz-date, then
  // x-amz-content-sha256 and x-amz-security-token when signed. The token's value is the secret
  // token itself: send it, never print it.
  std::vector<http_header> added_headers;
};

// The current time in UTC, to the second (std::chrono::system_clock counts UTC).
[[nodiscard]] inline std::chrono::sys_seconds utc_now() {
  return std::chrono::floor<std::chrono::seconds>(std::chrono::system_clock::now());
}

// `t` as SigV4's ISO 8601 basic form, "20150830T123600Z".
[[nodiscard]] inline std::string amz_date(std::chrono::sys_seconds t) {
  const auto day = std::chrono::floor<std::chrono::days>(t);
  const std::chrono::year_month_day ymd{day};
  const std::chrono::hh_mm_ss hms{t - day};
  char buf[80];  // room for any int, so that the compiler sees no truncation
  std::snprintf(buf, sizeof buf, "%04d%02u%02uT%02d%02d%02dZ", static_cast<int>(ymd.year()),
                static_cast<unsigned>(ymd.month()), static_cast<unsigned>(ymd.day()),
                static_cast<int>(hms.hours().count()), static_cast<int>(hms.minutes().count()),
                static_cast<int>(hms.seconds().count()));
  return buf;
}

// A header value as SigV4 signs it: trimmed, every run of blanks (space, tab, CR, LF) one space.
[[nodiscard]] inline std::string canonical_header_value(std::string_view v) {
  std::string out;
  bool blank = false;
  for (const char c : v) {
    if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
      blank = true;
      continue;
    }
    if (blank && !out.empty()) out += ' ';
    blank = false;
    out += c;
  }
  return out;
}

// The canonical headers block and the signed header names of `headers`; config_error for an
// empty name, a name with a blank, control character or ':', or no Host header.
[[nodiscard]] inline std::pair<std::string, std::string> canonical_headers(
    const std::vector<http_header>& headers) {
  std::vector<std::pair<std::string, std::string>> lower;  // stable by name: values keep order
  bool host = false;
  for (const auto& h : headers) {
    std::string name;
    for (const char c : h.name) {
      const auto b = static_cast<unsigned char>(c);
      if (b <= 0x20 || b >= 0x7F || c == ':')
        throw config_error(
            "invalid HTTP header name in a request to sign (a blank, control "
            "character or ':' in it)");
      name += static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    }
    if (name.empty()) throw config_error("empty HTTP header name in a request to sign");
    host = host || name == "host";
    lower.emplace_back(std::move(name), canonical_header_value(h.value));
  }
  std::stable_sort(lower.begin(), lower.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::string block, names;
  for (std::size_t i = 0; i < lower.size(); ++i) {
    if (i > 0 && lower[i].first == lower[i - 1].first) {
      block.pop_back();  // the '\n' of the previous value of this name
      block += ',' + lower[i].second + '\n';
      continue;
    }
    block += lower[i].first + ':' + lower[i].second + '\n';
    names += (names.empty() ? "" : ";") + lower[i].first;
  }
  if (!host) throw config_error("a request to sign must carry a Host header");
  return {block, names};
}

// The canonical request of `r` (whose headers already include those the signer adds), from its
// canonical headers block and signed names when the caller has them.
[[nodiscard]] inline std::string canonical_request(const request_to_sign& r,
                                                   const std::string& header_block,
                                                   const std::string& signed_names) {
  return r.method + '\n' + r.canonical_uri + '\n' + canonical_query(r.query) + '\n' + header_block +
         '\n' + signed_names + '\n' + r.payload_hash;
}

[[nodiscard]] inline std::string canonical_request(const request_to_sign& r) {
  const auto [block, names] = canonical_headers(r.headers);
  return canonical_request(r, block, names);
}

// The derived key for one day, region and service. Wiped intermediates: a key lasts as long as
// the returned digest.
[[nodiscard]] inline sha256_digest signing_key(const secret_text& secret, std::string_view date8,
                                               const signing_scope& scope) {
  std::string k = "AWS4";
  k += secret.reveal();
  sha256_digest key =
      hmac_sha256(reinterpret_cast<const unsigned char*>(k.data()), k.size(), date8);
  wipe(k.data(), k.size());
  for (const std::string_view step :
       {std::string_view(scope.region), std::string_view(scope.service),
        std::string_view("aws4_request")}) {
    const sha256_digest next = hmac_sha256(key, step);
    wipe(key.data(), key.size());
    key = next;
  }
  return key;
}

// Signs `r` with `c` at `when` for `scope`. config_error for anonymous credentials (send the
// request unsigned instead), an empty region or service, a header the signer adds given
// already, or a malformed header (canonical_headers).
[[nodiscard]] inline sigv4_signature sign(request_to_sign r, const credentials& c,
                                          const signing_scope& scope, std::chrono::sys_seconds when,
                                          const signing_options& options = {}) {
  if (c.anonymous()) throw config_error("anonymous credentials cannot sign a request");
  if (scope.region.empty() || scope.service.empty())
    throw config_error("SigV4 needs a region and a service to sign for");
  if (r.payload_hash.empty() || r.payload_hash.find_first_of(" \t\r\n") != std::string::npos)
    throw config_error("SigV4 needs a payload hash (hex SHA-256 of the body, or UNSIGNED-PAYLOAD)");
  for (const auto& h : r.headers) {
    std::string n;
    for (const char ch : h.name)
      n += static_cast<char>(ch >= 'A' && ch <= 'Z' ? ch - 'A' + 'a' : ch);
    if (n == "x-amz-date" || n == "x-amz-security-token" || n == "authorization" ||
        (n == "x-amz-content-sha256" && options.content_sha256_header))
      throw config_error("the request to sign already carries " + n + ", which the signer sets");
  }
  sigv4_signature s;
  const std::string date = amz_date(when);
  s.added_headers.push_back({"x-amz-date", date});
  if (options.content_sha256_header)
    s.added_headers.push_back({"x-amz-content-sha256", r.payload_hash});
  if (!c.security_token().empty())
    s.added_headers.push_back({"x-amz-security-token", std::string(c.security_token().reveal())});
  r.headers.insert(r.headers.end(), s.added_headers.begin(), s.added_headers.end());
  const auto [block, names] = canonical_headers(r.headers);
  s.canonical_request = canonical_request(r, block, names);
  const std::string scope_text =
      date.substr(0, 8) + '/' + scope.region + '/' + scope.service + "/aws4_request";
  s.string_to_sign =
      "AWS4-HMAC-SHA256\n" + date + '\n' + scope_text + '\n' + sha256_hex(s.canonical_request);
  sha256_digest key = signing_key(c.secret_access_key(), date.substr(0, 8), scope);
  s.signature = to_hex(hmac_sha256(key, s.string_to_sign));
  wipe(key.data(), key.size());
  s.authorization = "AWS4-HMAC-SHA256 Credential=" + c.access_key_id() + '/' + scope_text +
                    ", SignedHeaders=" + names + ", Signature=" + s.signature;
  return s;
}

}  // namespace gpufeed::detail::remote
