// gpufeed — a remote shard's bytes from the string that names it: "http://…" and "https://…" read
// as given, "s3://bucket/key" at the URL its endpoint gives (s3_url.hpp: AWS's, or
// AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL, path style there) with every request signed by AWS
// Signature V4 (sigv4.hpp) with the credentials and region credentials.hpp finds; with no
// credentials found requests go unsigned (a public bucket). A GET has no body: the payload hash
// signed and sent is the empty body's.
//
// Nothing here prints a credential or a signature: errors name the object's URL redacted
// (http_file's name, s3_object::redacted), and a signing failure's message is sign()'s, which
// holds neither.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gpufeed/detail/remote/credentials.hpp"
#include "gpufeed/detail/remote/http_file.hpp"
#include "gpufeed/detail/remote/http_request.hpp"
#include "gpufeed/detail/remote/s3_url.hpp"
#include "gpufeed/detail/remote/sigv4.hpp"
#include "gpufeed/detail/remote/uri_encoding.hpp"
#include "gpufeed/detail/remote/url.hpp"
#include "gpufeed/error.hpp"

namespace gpufeed::detail::remote {

// A request_signer that signs each request with SigV4 for S3 in `region` with `c` (not
// anonymous): Host, the transport's own headers (Range, If-Match, ...), x-amz-date and
// x-amz-content-sha256 (the empty body's hash), x-amz-security-token for temporary credentials.
[[nodiscard]] inline request_signer s3_signer(credentials c, std::string region) {
  return [c = std::move(c), scope = signing_scope{std::move(region), "s3"}](http_request& r) {
    const http_url u = parse_http_url(r.url);
    request_to_sign q;
    q.method = r.method;
    q.canonical_uri = u.path;
    if (!u.query.empty()) {
      auto params = parse_query(u.query);
      if (!params) throw config_error("cannot sign a request whose query is malformed");
      q.query = std::move(*params);
    }
    q.headers.push_back({"Host", u.host_header()});
    q.headers.insert(q.headers.end(), r.headers.begin(), r.headers.end());
    q.payload_hash = std::string(empty_payload_sha256);
    sigv4_signature s = sign(std::move(q), c, scope, utc_now());
    for (auto& h : s.added_headers) r.headers.push_back(std::move(h));
    r.headers.push_back({"Authorization", std::move(s.authorization)});
  };
}

// Where an s3:// object is requested and how its requests are signed (an empty signer when
// anonymous). config_error as parse_s3_url, resolve_s3_endpoint and resolve_credentials say.
struct s3_request_plan {
  std::string url;  // the http(s) URL requests go to
  request_signer signer;
};
[[nodiscard]] inline s3_request_plan plan_s3_request(std::string_view s3_url) {
  const s3_object object = parse_s3_url(s3_url);
  const region_choice region = resolve_region();
  const s3_endpoint endpoint = resolve_s3_endpoint({}, region.region);
  s3_request_plan p;
  p.url = s3_object_url(endpoint, object).request_url();
  credentials c = resolve_credentials();
  if (!c.anonymous()) p.signer = s3_signer(std::move(c), endpoint.region);
  return p;
}

// Opens the object `url` names (is_remote_url): http_file's errors, named by the URL redacted
// (for s3://, the s3:// URL itself); config_error for a malformed URL or S3 setting.
[[nodiscard]] inline std::unique_ptr<http_file> open_remote_object(const std::string& url,
                                                                   http_options options = {}) {
  if (!is_s3_url(url)) {
    (void)parse_http_url(url);  // config_error for what libcurl would misread
    return std::make_unique<http_file>(url, std::move(options));
  }
  s3_request_plan p = plan_s3_request(url);
  if (p.signer) options.signer = std::move(p.signer);
  try {
    return std::make_unique<http_file>(std::move(p.url), std::move(options));
  } catch (const io_error& e) {  // name the s3:// URL the caller gave, then the endpoint's
    error_context ctx = e.context();
    ctx.where.reset();
    const std::string at = ctx.file;
    ctx.file = redact_url(url);
    throw io_error(e.message() + " (requested at " + at + ")", std::move(ctx));
  }
}

}  // namespace gpufeed::detail::remote
