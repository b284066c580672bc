// URLs of remote shards (gpufeed/detail/remote/url.hpp, s3_url.hpp, uri_encoding.hpp):
// SigV4's percent-encoding of keys and queries (spaces, unicode, '+', '=', '~', '/'); http(s)
// URLs parsed to what is requested; s3:// URLs taken literally as the AWS CLI does; the S3
// endpoint chosen from the option, AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL or AWS's own, with path
// or virtual-hosted addressing; redaction of userinfo and presigned queries in every form a
// message can print; and each malformed URL a config_error that names it without its secrets.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "gpufeed/detail/remote/s3_url.hpp"
#include "gpufeed/detail/remote/uri_encoding.hpp"
#include "gpufeed/detail/remote/url.hpp"
#include "gpufeed/error.hpp"
#include "env_guard.hpp"
#include "expect_error.hpp"
#include "test_util.hpp"

using namespace gpufeed::detail::remote;
using gpufeed::config_error;
using gpufeed::test::error_of;
using gpufeed::test::has;

TEST_CASE("uri_encode: unreserved kept, every other byte %XX upper-case, '/' only in paths") {
  CHECK(uri_encode("AZaz09-._~") == "AZaz09-._~");
  CHECK(uri_encode("a b+c=d&e/f?g#h%i") == "a%20b%2Bc%3Dd%26e%2Ff%3Fg%23h%25i");
  CHECK(uri_encode_path("/dir/my key+1=2~.bin") == "/dir/my%20key%2B1%3D2~.bin");
  CHECK(uri_encode_path("/donn\xC3\xA9"
                        "es/\xE1\x88\xB4.bin") == "/donn%C3%A9es/%E1%88%B4.bin");
  CHECK(uri_encode_path("//a/./b/../") == "//a/./b/../");  // never normalised
  CHECK(uri_encode(std::string("\x00\x7F\xFF", 3)) == "%00%7F%FF");
}

TEST_CASE("uri_decode and parse_query: escapes decoded, '+' kept, malformed escapes refused") {
  CHECK(uri_decode("a%20b%2Bc+d%e1%88%b4") == std::optional<std::string>("a b+c+d\xE1\x88\xB4"));
  CHECK(!uri_decode("100%"));
  CHECK(!uri_decode("%2"));
  CHECK(!uri_decode("%zz"));
  const auto q = parse_query("a=1&&b&c=%20x%3D&d=e=f");
  REQUIRE(q);
  REQUIRE(q->size() == 4);
  CHECK((*q)[0].name == "a");
  CHECK((*q)[0].value == "1");
  CHECK((*q)[1].name == "b");
  CHECK((*q)[1].value == "");
  CHECK((*q)[2].value == " x=");
  CHECK((*q)[3].name == "d");
  CHECK((*q)[3].value == "e=f");
  CHECK(!parse_query("a=%G1"));
}

TEST_CASE("canonical_query: encoded names and values, sorted by name then value, '=' always") {
  CHECK(canonical_query({}) == "");
  CHECK(canonical_query({{"prefix", "a/b c"}, {"max-keys", "2"}, {"list-type", "2"}}) ==
        "list-type=2&max-keys=2&prefix=a%2Fb%20c");
  CHECK(canonical_query({{"foo", "aha"}, {"foo", "Zoo"}}) == "foo=Zoo&foo=aha");
  CHECK(canonical_query({{"uploads", ""}}) == "uploads=");
  CHECK(canonical_query({{"k+", "v~"}, {"k", "v"}}) == "k=v&k%2B=v~");
}

TEST_CASE("parse_http_url: scheme, host, port, path and query as requested") {
  const auto a = parse_http_url("https://example.com/a/b%20c?x=1&y");
  CHECK(a.tls);
  CHECK(a.host == "example.com");
  CHECK(a.port == 443);
  CHECK(!a.port_written);
  CHECK(a.path == "/a/b%20c");
  CHECK(a.query == "x=1&y");
  CHECK(a.host_header() == "example.com");
  CHECK(a.request_url() == "https://example.com/a/b%20c?x=1&y");

  const auto b = parse_http_url("HTTP://Example.COM:8080");
  CHECK(!b.tls);
  CHECK(b.host == "example.com");
  CHECK(b.port == 8080);
  CHECK(b.path == "/");
  CHECK(b.host_header() == "example.com:8080");
  CHECK(parse_http_url("http://h:80/").host_header() == "h");
  CHECK(parse_http_url("https://h:443/").host_header() == "h");

  const auto c = parse_http_url("http://[::1]:9000/bucket/key#fragment");
  CHECK(c.host == "[::1]");
  CHECK(c.port == 9000);
  CHECK(c.path == "/bucket/key");
  CHECK(c.request_url() == "http://[::1]:9000/bucket/key");

  const auto d = parse_http_url("https://h?only=query");
  CHECK(d.path == "/");
  CHECK(d.query == "only=query");
}

TEST_CASE("parse_http_url: userinfo is kept for the reader but never printed") {
  const auto u = parse_http_url("https://alice:hunter2@host.example:8443/data/x.h5?v=1");
  CHECK(u.userinfo == "alice:hunter2");
  CHECK(u.host == "host.example");
  CHECK(u.request_url() == "https://host.example:8443/data/x.h5?v=1");
  CHECK(u.redacted() == "https://***@host.example:8443/data/x.h5?v=1");
  CHECK(!has(u.redacted(), "hunter2"));
  CHECK(!has(u.redacted(), "alice"));
}

TEST_CASE("redact_url: userinfo and secret query values hidden, everything else kept") {
  CHECK(
      redact_url("https://bucket.s3.amazonaws.com/key.bin?X-Amz-Algorithm=AWS4-HMAC-SHA256"
                 "&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request"
                 "&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&X-Amz-SignedHeaders=host"
                 "&X-Amz-Security-Token=FQoGZXIvYXdzEXAMPLE&X-Amz-Signature=aeeed9bbccd4d02ee5c0"
                 "#frag") ==
      "https://bucket.s3.amazonaws.com/key.bin?X-Amz-Algorithm=AWS4-HMAC-SHA256"
      "&X-Amz-Credential=***&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400"
      "&X-Amz-SignedHeaders=host&X-Amz-Security-Token=***&X-Amz-Signature=***");
  // Other stores' signatures and tokens, in any case, encoded names included.
  CHECK(redact_url("https://acct.blob.core.windows.net/c/b?sv=2020-08-04&sig=abc%2Fdef&se=2030") ==
        "https://acct.blob.core.windows.net/c/b?sv=2020-08-04&sig=***&se=2030");
  CHECK(redact_url(
            "https://h/o?x-goog-signature=1&ACCESS_TOKEN=2&api_key=3&Password=4&versionId=7") ==
        "https://h/o?x-goog-signature=***&ACCESS_TOKEN=***&api_key=***&Password=***&versionId=7");
  CHECK(redact_url("https://h/o?X%2DAmz%2DSignature=abc") == "https://h/o?X%2DAmz%2DSignature=***");
  // Userinfo, also where the URL is malformed.
  CHECK(redact_url("http://ak:sk@127.0.0.1:9000/b/k") == "http://***@127.0.0.1:9000/b/k");
  CHECK(redact_url("https//user:pw@host/x") == "***@host/x");
  CHECK(redact_url("s3://user:pw@bucket/key") == "s3://***@bucket/key");
  // An '@' in the path is not userinfo.
  CHECK(redact_url("https://h/a@b/c") == "https://h/a@b/c");
  CHECK(redact_url("plain text") == "plain text");
  // As a malformed URL: everything before the last '@' goes, wherever it lies.
  CHECK(redact_url("https://u:p/w@host/k?sig=1", true) == "https://***@host/k?sig=***");
  CHECK(redact_url("https://h/a@b/c", true) == "https://***@b/c");
  CHECK(redact_url("https://h/a b", true) == "https://h/a b");
}

TEST_CASE("parse_http_url: each malformed URL is a config_error naming it, redacted") {
  struct bad {
    const char* url;
    const char* why;
  };
  for (const bad& b : std::vector<bad>{
           {"example.com/x", "no scheme"},
           {"ftp://host/x", "scheme 'ftp'"},
           {"https://", "no host"},
           {"https:///path", "no host"},
           {"https://host:/x", "empty port"},
           {"https://host:0/x", "port out of range"},
           {"https://host:65536/x", "port out of range"},
           {"https://host:12a/x", "invalid port"},
           {"https://ho st/x", "invalid character in the host name"},
           {"https://host/a b", "percent-encode"},
           {"https://host/a%zzb", "two hex digits"},
           {"https://host/a%2", "two hex digits"},
           {"https://host/caf\xC3\xA9", "percent-encode"},
           {"https://host/a|b", "percent-encode"},
           {"https://host/x?q=a\tb", "percent-encode"},
           {"https://[::1/x", "unterminated IPv6"},
           {"https://[::1]x/", "after the IPv6 address"},
           {"https://[zz]/", "invalid IPv6"},
       }) {
    CAPTURE(b.url);
    const std::string what = error_of<config_error>([&] { (void)parse_http_url(b.url); });
    CHECK(has(what, "malformed URL"));
    CHECK(has(what, b.why));
    CHECK(has(what, "'" + redact_url(b.url, true) + "'"));
  }
  const std::string what = error_of<config_error>([] {
    (void)parse_http_url("https://AKIAEXAMPLE:s3cr3tValue@host/a b?X-Amz-Signature=f00d");
  });
  CHECK(has(what, "https://***@host/a b?X-Amz-Signature=***"));
  CHECK(!has(what, "s3cr3tValue"));
  CHECK(!has(what, "AKIAEXAMPLE"));
  CHECK(!has(what, "f00d"));
  // Passwords holding '/', '?' or '#' unencoded, and text before "://" that is no scheme: the
  // URL is malformed, and nothing before its last '@' is printed.
  for (const char* url : {"https://alice:hunter/2@host/x y", "https://alice:hunter?2@host/",
                          "https://alice:hunter#2@host:x/", "alice:hunter2@host://x"}) {
    CAPTURE(url);
    const std::string w = error_of<config_error>([&] { (void)parse_http_url(url); });
    CHECK(has(w, "malformed URL"));
    CHECK(!has(w, "alice"));
    CHECK(!has(w, "hunter"));
  }
}

TEST_CASE("parse_s3_url: bucket and literal key, as the AWS CLI reads them") {
  const auto a = parse_s3_url("s3://my-bucket/dir/my key+1=2~%20.bin");
  CHECK(a.bucket == "my-bucket");
  CHECK(a.key == "dir/my key+1=2~%20.bin");  // '%20' is part of the key, not an escape
  CHECK(a.url() == "s3://my-bucket/dir/my key+1=2~%20.bin");
  CHECK(parse_s3_url("s3://b/k?X-Amz-Signature=abc").redacted() == "s3://b/k?X-Amz-Signature=***");
  CHECK(parse_s3_url("S3://b/k?x#y").key == "k?x#y");
  CHECK(parse_s3_url("s3://b/donn\xC3\xA9"
                     "es/\xE1\x88\xB4")
            .key ==
        "donn\xC3\xA9"
        "es/\xE1\x88\xB4");
  CHECK(parse_s3_url("s3://bucket").key.empty());
  CHECK(parse_s3_url("s3://bucket/").key.empty());
  CHECK(parse_s3_url("s3://bucket//a").key == "/a");
  CHECK(is_s3_url("s3://b/k"));
  CHECK(!is_s3_url("https://b/k"));
  CHECK(!is_s3_url("s3:/b"));
}

TEST_CASE("parse_s3_url: each malformed s3:// URL is a config_error naming it, redacted") {
  struct bad {
    std::string url;
    const char* why;
  };
  for (const bad& b : std::vector<bad>{
           {"s3://", "no bucket"},
           {"s3:///key", "no bucket"},
           {"s3://buck et/k", "invalid character in the bucket name"},
           {"s3://bucket!/k", "invalid character in the bucket name"},
           {"s3://b/" + std::string(1025, 'k'), "longer than 1024"},
           {"s3://b/line\nbreak", "control character"},
           {"https://b/k", "not an s3:// URL"},
       }) {
    CAPTURE(b.url);
    const std::string what = error_of<config_error>([&] { (void)parse_s3_url(b.url); });
    CHECK(has(what, b.why));
    CHECK(has(what, "'" + redact_url(b.url, true) + "'"));
  }
  const std::string what =
      error_of<config_error>([] { (void)parse_s3_url("s3://AKIAEXAMPLE:s3cr3tValue@bucket/k"); });
  CHECK(has(what, "credentials in an s3:// URL are not supported"));
  CHECK(has(what, "s3://***@bucket/k"));
  CHECK(!has(what, "s3cr3tValue"));
}

TEST_CASE("s3 endpoints: AWS's own, virtual-hosted unless the bucket cannot be a host label") {
  gpufeed::test::temp_dir home("url_home");
  gpufeed::test::env_guard env;
  gpufeed::test::clean_aws_environment(env, home.path().string());
  const auto e = resolve_s3_endpoint({}, "us-west-2");
  CHECK(!e.custom);
  CHECK(e.region == "us-west-2");
  CHECK(s3_object_url(e, parse_s3_url("s3://my-bucket/a b/c+d=e~.bin")).request_url() ==
        "https://my-bucket.s3.us-west-2.amazonaws.com/a%20b/c%2Bd%3De~.bin");
  // Dots (a wildcard certificate covers one label), upper case, '_': in the path instead.
  CHECK(s3_object_url(e, parse_s3_url("s3://my.bucket/k")).request_url() ==
        "https://s3.us-west-2.amazonaws.com/my.bucket/k");
  CHECK(s3_object_url(e, parse_s3_url("s3://My_Bucket/k")).request_url() ==
        "https://s3.us-west-2.amazonaws.com/My_Bucket/k");
  CHECK(s3_object_url(resolve_s3_endpoint({}, "cn-north-1"), parse_s3_url("s3://bkt/k"))
            .request_url() == "https://bkt.s3.cn-north-1.amazonaws.com.cn/k");
  s3_endpoint_options path;
  path.addressing = s3_addressing::path_style;
  CHECK(s3_object_url(resolve_s3_endpoint(path, "eu-west-1"), parse_s3_url("s3://bkt/x/y.h5"))
            .request_url() == "https://s3.eu-west-1.amazonaws.com/bkt/x/y.h5");
  CHECK(has(error_of<config_error>([] { (void)resolve_s3_endpoint({}, "US_EAST"); }),
            "malformed AWS region 'US_EAST'"));
  CHECK(has(error_of<config_error>([] { (void)resolve_s3_endpoint({}, ""); }), "no AWS region"));
}

TEST_CASE("s3 endpoints: a custom one (option, AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL), by path") {
  gpufeed::test::temp_dir home("url_home");
  gpufeed::test::env_guard env;
  gpufeed::test::clean_aws_environment(env, home.path().string());
  const auto obj = parse_s3_url("s3://bucket/shards/train 0001.h5");

  env.set("AWS_ENDPOINT_URL", "http://fallback:9000");
  auto e = resolve_s3_endpoint({}, "us-east-1");
  CHECK(e.custom);
  CHECK(e.origin == "AWS_ENDPOINT_URL");
  CHECK(s3_object_url(e, obj).request_url() ==
        "http://fallback:9000/bucket/shards/train%200001.h5");

  env.set("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:9000");
  e = resolve_s3_endpoint({}, "us-east-1");
  CHECK(e.origin == "AWS_ENDPOINT_URL_S3");
  const auto u = s3_object_url(e, obj);
  CHECK(u.request_url() == "http://127.0.0.1:9000/bucket/shards/train%200001.h5");
  CHECK(u.host_header() == "127.0.0.1:9000");
  CHECK(u.path == "/bucket/shards/train%200001.h5");

  s3_endpoint_options o;
  o.endpoint_url = "https://ceph.example:7480/s3/";  // a prefix in the path: behind a proxy
  e = resolve_s3_endpoint(o, "us-east-1");
  CHECK(e.origin == "the endpoint option");
  CHECK(s3_object_url(e, obj).request_url() ==
        "https://ceph.example:7480/s3/bucket/shards/train%200001.h5");
  o.addressing = s3_addressing::virtual_hosted;
  o.endpoint_url = "http://minio.local:9000";
  CHECK(s3_object_url(resolve_s3_endpoint(o, "us-east-1"), obj).request_url() ==
        "http://bucket.minio.local:9000/shards/train%200001.h5");
}

TEST_CASE("s3 endpoints: an unusable endpoint URL is a config_error naming where it came from") {
  gpufeed::test::temp_dir home("url_home");
  gpufeed::test::env_guard env;
  gpufeed::test::clean_aws_environment(env, home.path().string());
  env.set("AWS_ENDPOINT_URL_S3", "127.0.0.1:9000");
  std::string what = error_of<config_error>([] { (void)resolve_s3_endpoint({}, "us-east-1"); });
  CHECK(has(what, "AWS_ENDPOINT_URL_S3"));
  CHECK(has(what, "no scheme"));
  env.set("AWS_ENDPOINT_URL_S3", "http://minioadmin:m1n10s3cret@127.0.0.1:9000");
  what = error_of<config_error>([] { (void)resolve_s3_endpoint({}, "us-east-1"); });
  CHECK(has(what, "must not hold credentials"));
  CHECK(has(what, "http://***@127.0.0.1:9000/"));
  CHECK(!has(what, "m1n10s3cret"));
}
