// gpufeed — s3:// URLs, and the HTTP(S) URL an object is requested at.
//
// "s3://bucket/key" names an object the way the AWS CLI does: everything after the bucket's '/'
// is the key, taken literally (a '%', '?', '#', '+' or space in it is part of the key, not an
// escape or a query). Where the request goes is the endpoint's business (resolve_s3_endpoint):
//   - AWS itself (no endpoint configured): https://s3.<region>.amazonaws.com, the bucket in the
//     host name ("virtual-hosted": bucket.s3.<region>.amazonaws.com/key), except for a bucket
//     name that cannot be a TLS host label (a '.', an upper-case letter, an '_'), which goes in
//     the path instead so that the certificate still matches;
//   - a custom endpoint (an explicit option, else AWS_ENDPOINT_URL_S3, else AWS_ENDPOINT_URL:
//     MinIO, Ceph RGW, another S3-compatible store), addressed by path
//     (http://127.0.0.1:9000/bucket/key), which such stores accept without DNS set-up;
//   - either way, an explicit addressing choice wins over these defaults.
// The key goes into the path percent-encoded per segment (uri_encoding.hpp), '/' kept, never
// normalised: exactly the canonical URI SigV4 signs for S3.
#pragma once

#include <cctype>
#include <cstdlib>
#include <string>
#include <string_view>

#include "gpufeed/detail/remote/uri_encoding.hpp"
#include "gpufeed/detail/remote/url.hpp"
#include "gpufeed/error.hpp"

namespace gpufeed::detail::remote {

// One object (or, with an empty key, a bucket or the prefix "") of an S3-compatible store.
struct s3_object {
  std::string bucket;
  std::string key;  // literal, not percent-encoded; may be empty

  [[nodiscard]] std::string url() const { return "s3://" + bucket + "/" + key; }
  // url() for messages (redact_url): a key can look like a presigned query.
  [[nodiscard]] std::string redacted() const { return redact_url(url()); }
};

// True when `url` starts with "s3://" (scheme without regard to case).
[[nodiscard]] inline bool is_s3_url(std::string_view url) noexcept {
  if (url.size() < 5 || url.substr(2, 3) != "://") return false;
  return (url[0] == 's' || url[0] == 'S') && url[1] == '3';
}

// True when `s` names a remote object: http://, https:// or s3:// (scheme without regard to case).
[[nodiscard]] inline bool is_remote_url(std::string_view s) noexcept {
  const auto starts = [&](std::string_view scheme) {
    if (s.size() < scheme.size()) return false;
    for (std::size_t i = 0; i < scheme.size(); ++i) {
      char c = s[i];
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
      if (c != scheme[i]) return false;
    }
    return true;
  };
  return starts("http://") || starts("https://") || is_s3_url(s);
}

// Parses "s3://bucket[/key]"; config_error naming the URL (redacted) when the scheme is not s3,
// the bucket is empty or holds a character no store accepts in a bucket name (letters, digits,
// '.', '-', '_' only, at most 255: AWS's older rules, which MinIO and Ceph's stricter ones fit
// within), userinfo is written (credentials come from the environment or a profile, never the
// URL), or the key holds a control character or is longer than S3's 1024 bytes.
[[nodiscard]] inline s3_object parse_s3_url(std::string_view url) {
  if (!is_s3_url(url)) throw_malformed_url(url, "not an s3:// URL");
  const std::string_view rest = url.substr(5);
  const std::size_t slash = rest.find('/');
  const std::string_view bucket = rest.substr(0, slash);
  s3_object o;
  if (bucket.find('@') != std::string_view::npos)
    throw_malformed_url(url,
                        "credentials in an s3:// URL are not supported (set them in the "
                        "environment or a profile)");
  if (bucket.empty()) throw_malformed_url(url, "no bucket name");
  if (bucket.size() > 255) throw_malformed_url(url, "bucket name longer than 255 characters");
  for (const char c : bucket)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != '_')
      throw_malformed_url(url,
                          "invalid character in the bucket name (letters, digits, '.', '-' "
                          "and '_' only)");
  o.bucket = std::string(bucket);
  if (slash != std::string_view::npos) o.key = std::string(rest.substr(slash + 1));
  if (o.key.size() > 1024) throw_malformed_url(url, "key longer than 1024 bytes");
  for (const char c : o.key)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7F)
      throw_malformed_url(url, "control character in the key");
  return o;
}

// How requests name the bucket: in the host (virtual-hosted) or as the path's first segment.
enum class s3_addressing { automatic, path_style, virtual_hosted };

struct s3_endpoint_options {
  // The store's URL ("http://127.0.0.1:9000"); empty: AWS_ENDPOINT_URL_S3, else
  // AWS_ENDPOINT_URL, else AWS's own endpoint for the region. A path in it ("/s3") prefixes every
  // request (a store behind a proxy).
  std::string endpoint_url;
  // automatic: path style at a custom endpoint, virtual-hosted at AWS's (see the top).
  s3_addressing addressing = s3_addressing::automatic;
};

// Where requests for a region's objects go.
struct s3_endpoint {
  http_url base;        // scheme, host and port; path: the prefix requests go under ("/")
  std::string region;   // signs the requests (SigV4's scope) and names AWS's host
  bool custom = false;  // a store other than AWS's own endpoint
  s3_addressing addressing = s3_addressing::automatic;  // as chosen; see s3_object_url
  std::string origin;  // where base came from, for messages: "AWS_ENDPOINT_URL_S3", ...
};

// True when `bucket` can be a host label under TLS: 3 to 63 lower-case letters, digits and '-',
// starting and ending with a letter or digit (no '.': a wildcard certificate covers one label).
[[nodiscard]] inline bool virtual_host_bucket(std::string_view bucket) noexcept {
  if (bucket.size() < 3 || bucket.size() > 63) return false;
  for (const char c : bucket)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
  return bucket.front() != '-' && bucket.back() != '-';
}

// The endpoint for `region` (checked: lower-case letters, digits and '-'): options' endpoint_url,
// else AWS_ENDPOINT_URL_S3, else AWS_ENDPOINT_URL, else AWS's own. config_error naming the
// setting when the region is malformed or the endpoint URL is not an http(s) URL without
// userinfo and query.
[[nodiscard]] inline s3_endpoint resolve_s3_endpoint(const s3_endpoint_options& options,
                                                     const std::string& region) {
  if (region.empty()) throw config_error("no AWS region to address S3 in");
  for (const char c : region)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'))
      throw config_error("malformed AWS region '" + region +
                         "' (lower-case letters, digits and '-' only)");
  s3_endpoint e;
  e.region = region;
  e.addressing = options.addressing;
  std::string url = options.endpoint_url;
  e.origin = "the endpoint option";
  for (const char* var : {"AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"}) {
    if (!url.empty()) break;
    const char* v = std::getenv(var);
    url = v ? v : "";
    e.origin = var;
  }
  if (url.empty()) {
    const bool china = region.rfind("cn-", 0) == 0;
    e.base =
        parse_http_url("https://s3." + region + (china ? ".amazonaws.com.cn" : ".amazonaws.com"));
    e.origin = "AWS's endpoint for region " + region;
    return e;
  }
  try {
    e.base = parse_http_url(url);
  } catch (const config_error& err) {
    throw config_error("the S3 endpoint from " + e.origin + " is not usable: " + err.message(),
                       err.context());
  }
  if (!e.base.userinfo.empty() || !e.base.query.empty())
    throw config_error("the S3 endpoint from " + e.origin + " must not hold credentials or a query",
                       file_context(e.base.redacted()));
  e.custom = true;
  return e;
}

// The URL `object` is requested at through `endpoint`: path style puts the bucket first in the
// path, virtual-hosted style in front of the endpoint's host. The key is encoded per segment
// (uri_encode_path), so the path is also SigV4's canonical URI.
[[nodiscard]] inline http_url s3_object_url(const s3_endpoint& endpoint, const s3_object& object) {
  bool path_style = endpoint.addressing == s3_addressing::path_style;
  if (endpoint.addressing == s3_addressing::automatic)
    path_style = endpoint.custom || !virtual_host_bucket(object.bucket);
  http_url u = endpoint.base;
  std::string prefix = u.path;
  while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
  if (path_style) {
    u.path = prefix + "/" + uri_encode(object.bucket) +
             (object.key.empty() ? "" : "/" + uri_encode_path(object.key));
  } else {
    u.host = object.bucket + "." + u.host;
    u.path = prefix + "/" + uri_encode_path(object.key);
  }
  return u;
}

}  // namespace gpufeed::detail::remote
