// AWS Signature Version 4 (gpufeed/detail/remote/sigv4.hpp) against AWS's published vectors:
// the aws-sig-v4-test-suite (credentials AKIDEXAMPLE, region us-east-1, service "service",
// 20150830T123600Z), in the "unnormalized" form of its path cases where the suite has one,
// since S3 signs paths as sent; and the S3 documentation's worked examples of header-based
// authentication (GET Object with a Range, PUT Object, GET Bucket lifecycle, ListObjects). Each
// case asserts the canonical request, the string to sign and the Authorization header exactly.
// Also: the signing key of the docs' derivation example, the x-amz-* headers the signer adds,
// UNSIGNED-PAYLOAD, the date format, and the requests it refuses to sign.
#include <doctest/doctest.h>

#include <chrono>
#include <string>
#include <vector>

#include "gpufeed/detail/remote/s3_url.hpp"
#include "gpufeed/detail/remote/sigv4.hpp"
#include "gpufeed/error.hpp"
#include "env_guard.hpp"
#include "expect_error.hpp"
#include "test_util.hpp"

using namespace gpufeed::detail::remote;
using gpufeed::config_error;
using gpufeed::test::error_of;
using gpufeed::test::has;
using namespace std::chrono_literals;

namespace {

const std::chrono::sys_seconds suite_time =
    std::chrono::sys_days{std::chrono::year{2015} / 8 / 30} + 12h + 36min;
const std::chrono::sys_seconds s3_doc_time =
    std::chrono::sys_days{std::chrono::year{2013} / 5 / 24};
const char* const suite_secret = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";

struct suite_case {
  const char* name;
  request_to_sign request;
  std::string token;            // temporary credentials' token, or ""
  bool content_sha256 = false;  // the signer adds x-amz-content-sha256
  const char* canonical_request;
  const char* string_to_sign;
  const char* signature;
  const char* signed_headers;
};

request_to_sign req(const char* method, std::string path, std::vector<query_param> query = {},
                    std::vector<http_header> extra = {}) {
  request_to_sign r;
  r.method = method;
  r.canonical_uri = uri_encode_path(path);
  r.query = std::move(query);
  r.headers = {{"Host", "example.amazonaws.com"}};
  r.headers.insert(r.headers.end(), extra.begin(), extra.end());
  return r;
}

const std::string unreserved = "-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
const std::string sts_token =
    "AQoDYXdzEPT//////////wEXAMPLEtc764bNrC9SAPBSM22wDOk4x4HIZ8j4FZTwdQWLWsKWHGBuFqwAeMicRXmxfpSPf"
    "IeoIYRqTflfKD8YUuwthAx7mSEI/qkPpKPi/kMcGdQrmGdeehM4IC1NtBmUpp2wUE8phUZampKsburEDy0KPkyQDYwT7W"
    "Z0wq5VSXDvp75YU9HFvlRd8Tx6q6fE8YQcHNVXAkiY9q6d+xo0rKwT38xVqr7ZD0u0iPPkUL64lIZbqBAz+scqKmlzm8F"
    "DrypNC9Yjc8fPOLn9FX9KSYvKTr4rvx3iSIlTJabIQwj2ICCR/oLxBA==";
const std::string form_body_sha256 = sha256_hex("Param1=value1");

// The text every suite vector shares: its Host line, its x-amz-date line, the empty body's hash
// and the head of its string to sign (macros, so that literals concatenate).
#define GPUFEED_HOST "\nhost:example.amazonaws.com\n"
#define GPUFEED_DATE "x-amz-date:20150830T123600Z\n"
#define GPUFEED_EMPTY "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
#define GPUFEED_STS "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/aws4_request\n"

std::vector<suite_case> suite_cases() {
  std::vector<suite_case> c;
  auto add = [&c](const char* name, request_to_sign r, const char* creq, const char* sts,
                  const char* sig, const char* signed_headers = "host;x-amz-date") {
    c.push_back({name, std::move(r), "", false, creq, sts, sig, signed_headers});
  };
  add("get-vanilla", req("GET", "/"),
      "GET\n/\n" GPUFEED_HOST GPUFEED_DATE "\nhost;x-amz-date\n" GPUFEED_EMPTY,
      GPUFEED_STS "bb579772317eb040ac9ed261061d46c1f17a8133879d6129b6e1c25292927e63",
      "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31");
  add("get-vanilla-query", req("GET", "/", {}),
      "GET\n/\n" GPUFEED_HOST GPUFEED_DATE "\nhost;x-amz-date\n" GPUFEED_EMPTY,
      GPUFEED_STS "bb579772317eb040ac9ed261061d46c1f17a8133879d6129b6e1c25292927e63",
      "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31");
  add("get-vanilla-empty-query-key", req("GET", "/", {{"Param1", "value1"}}),
      "GET\n/\nParam1=value1" GPUFEED_HOST GPUFEED_DATE "\nhost;x-amz-date\n" GPUFEED_EMPTY,
      GPUFEED_STS "1e24db194ed7d0eec2de28d7369675a243488e08526e8c1c73571282f7c517ab",
      "a67d582fa61cc504c4bae71f336f98b97f1ea3c7a6bfe1b6e45aec72011b9aeb");
  add("get-vanilla-query-order-key-case",
      req("GET", "/", {{"Param2", "value2"}, {"Param1", "value1"}}),
      "GET\n/\nParam1=value1&Param2=value2" GPUFEED_HOST GPUFEED_DATE
      "\nhost;x-amz-date\n" GPUFEED_EMPTY,
      GPUFEED_STS "816cd5b414d056048ba4f7c5386d6e0533120fb1fcfa93762cf0fc39e2cf19e0",
      "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500");
  add("get-vanilla-query-order-encoded",
      req("GET", "/", {{"Param-3", "Value3"}, {"Param", "Value2"}, {"\xE1\x88\xB4", "Value1"}}),
      "GET\n/\n%E1%88%B4=Value1&Param=Value2&Param-3=Value3" GPUFEED_HOST GPUFEED_DATE
      "\nhost;x-amz-date\n" GPUFEED_EMPTY,
      GPUFEED_STS "868294f5c38bd141c4972a373a76654f1418a8e4fc18b2e7903ae45e8ae0ec71",
      "371d3713e185cc334048618a97f809c9ffe339c62934c032af5a0e595648fcac");
  add("get-vanilla-query-unreserved", req("GET", "/", {{unreserved, unreserved}}),
      "GET\n/\n-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz="
      "-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz" GPUFEED_HOST GPUFEED_DATE
      "\nhost;x-amz-date\n" GPUFEED_EMPTY,
      GPUFEED_STS "c30d4703d9f799439be92736156d47ccfb2d879ddf56f5befa6d1d6aab979177",
      "9c3e54bfcdf0b19771a7f523ee5669cdf59bc7cc0884027167c21bb143a40197");
  add("get-vanilla-utf8-query", req("GET", "/", {{"\xE1\x88\xB4", "bar"}}),
      "GET\n/\n%E1%88%B4=bar" GPUFEED_HOST GPUFEED_DATE "\nhost;x-amz-date\n" GPUFEED_EMPTY,
      GPUFEED_STS "eb30c5bed55734080471a834cc727ae56beb50e5f39d1bff6d0d38cb192a7073",
      "2cdec8eed098649ff3a119c94853b13c643bcf08f8b0a1d91e12c9027818dd04");
  add("get-header-key-duplicate",
      req("GET", "/", {},
          {{"My-Header1", "value2"}, {"My-Header1", "value2"}, {"My-Header1", "value1"}}),
      "GET\n/\n" GPUFEED_HOST "my-header1:value2,value2,value1\n" GPUFEED_DATE
      "\nhost;my-header1;x-amz-date\n" GPUFEED_EMPTY,
      GPUFEED_STS "dc7f04a3abfde8d472b0ab1a418b741b7c67174dad1551b4117b15527fbe966c",
      "c9d5ea9f3f72853aea855b47ea873832890dbdd183b4468f858259531a5138ea",
      "host;my-header1;x-amz-date");
  add("get-header-value-order",
      req("GET", "/", {},
          {{"My-Header1", "value4"},
           {"My-Header1", "value1"},
           {"My-Header1", "value3"},
           {"My-Header1", "value2"}}),
      "GET\n/\n" GPUFEED_HOST "my-header1:value4,value1,value3,value2\n" GPUFEED_DATE
      "\nhost;my-header1;x-amz-date\n" GPUFEED_EMPTY,
      GPUFEED_STS "31ce73cd3f3d9f66977ad3dd957dc47af14df92fcd8509f59b349e9137c58b86",
      "08c7e5a9acfcfeb3ab6b2185e75ce8b1deb5e634ec47601a50643f830c755c01",
      "host;my-header1;x-amz-date");
  add("get-header-value-multiline",
      req("GET", "/", {}, {{"My-Header1", "value1\n  value2\n     value3"}}),
      "GET\n/\n" GPUFEED_HOST "my-header1:value1 value2 value3\n" GPUFEED_DATE
      "\nhost;my-header1;x-amz-date\n" GPUFEED_EMPTY,
      GPUFEED_STS "e99419459a677bc11de234014be3c4e72c1ea5b454ceb58b613061f5d7a162e8",
      "cfd34249e4b1c8d6b91ef74165d41a32e5fab3306300901bb65a51a73575eefd",
      "host;my-header1;x-amz-date");
  add("get-header-value-trim",
      req("GET", "/", {}, {{"My-Header1", " value1"}, {"My-Header2", " \"a   b   c\""}}),
      "GET\n/\n" GPUFEED_HOST "my-header1:value1\nmy-header2:\"a b c\"\n" GPUFEED_DATE
      "\nhost;my-header1;my-header2;x-amz-date\n" GPUFEED_EMPTY,
      GPUFEED_STS "a726db9b0df21c14f559d0a978e563112acb1b9e05476f0a6a1c7d68f28605c7",
      "acc3ed3afb60bb290fc8d2dd0098b9911fcaa05412b367055dee359757a9c736",
      "host;my-header1;my-header2;x-amz-date");
  add("get-space (unnormalized)", req("GET", "/example space/"),
      "GET\n/example%20space/\n" GPUFEED_HOST GPUFEED_DATE "\nhost;x-amz-date\n" GPUFEED_EMPTY,
      GPUFEED_STS "63ee75631ed7234ae61b5f736dfc7754cdccfedbff4b5128a915706ee9390d86",
      "652487583200325589f1fba4c7e578f72c47cb61beeca81406b39ddec1366741");
  add("get-slash-unnormalized", req("GET", "//"),
      "GET\n//\n" GPUFEED_HOST GPUFEED_DATE "\nhost;x-amz-date\n" GPUFEED_EMPTY,
      GPUFEED_STS "80cb39203d058af815de2b79250ff56e1b73eb9b4718c86556cdc6f150c5d209",
      "c88bcd3d312d75078c0cd961d6deae3f4c754924b01669efcfcb439fd5e5b76e");
  add("get-slashes-unnormalized", req("GET", "//example//"),
      "GET\n//example//\n" GPUFEED_HOST GPUFEED_DATE "\nhost;x-amz-date\n" GPUFEED_EMPTY,
      GPUFEED_STS "528ec3105ee1f34ab014bb0a1a45da0ed2742a4fea3555149e5b4d5d201eb240",
      "87cca117541a147f6df867677d98a7d80dff226d2bfca9e4ffa899665623c7e5");
  add("get-slash-dot-slash-unnormalized", req("GET", "/./"),
      "GET\n/./\n" GPUFEED_HOST GPUFEED_DATE "\nhost;x-amz-date\n" GPUFEED_EMPTY,
      GPUFEED_STS "d67825e2268bd77a97c7688b8d72c31a3c1855b309808505ba0a9747d2465aa7",
      "68714168e6557f8f2de0ef956fc24dc2593a4bd2961f8df51898d8a134695145");
  add("get-slash-pointless-dot-unnormalized", req("GET", "/./example"),
      "GET\n/./example\n" GPUFEED_HOST GPUFEED_DATE "\nhost;x-amz-date\n" GPUFEED_EMPTY,
      GPUFEED_STS "73895e0e829507e28e39fd24669aedc2434a8e179e547e3c075b42921f952cdb",
      "beb03f223f7deae4146464f06e29eebbee9c8afbe15c290cf07aa8b119e14cff");
  add("get-relative-unnormalized", req("GET", "/example/.."),
      "GET\n/example/..\n" GPUFEED_HOST GPUFEED_DATE "\nhost;x-amz-date\n" GPUFEED_EMPTY,
      GPUFEED_STS "0511f456aa502b456d135fcb9d749374a55228f9dbeedda1eacf659e05b0615b",
      "eca7ead57bb5aa5c8e28007acd4ff04e1ff9a0ff3b237ec1554a184887ff9282");
  add("get-relative-relative-unnormalized", req("GET", "/example1/example2/../.."),
      "GET\n/example1/example2/../..\n" GPUFEED_HOST GPUFEED_DATE
      "\nhost;x-amz-date\n" GPUFEED_EMPTY,
      GPUFEED_STS "76115030c0f3ff06c20fdff5ceb6d5e0b835a1743e00b94fea7c7f381269437b",
      "dc33e0856fd4baca4d7aa2146c38958283844764f38c74252a333df5e613003b");
  add("get-unreserved", req("GET", "/" + unreserved),
      "GET\n/-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz\n" GPUFEED_HOST
          GPUFEED_DATE "\nhost;x-amz-date\n" GPUFEED_EMPTY,
      GPUFEED_STS "6a968768eefaa713e2a6b16b589a8ea192661f098f37349f4e2c0082757446f9",
      "07ef7494c76fa4850883e2b006601f940f8a34d404d0cfa977f52a65bbf5f24f");
  add("get-utf8", req("GET", "/\xE1\x88\xB4"),
      "GET\n/%E1%88%B4\n" GPUFEED_HOST GPUFEED_DATE "\nhost;x-amz-date\n" GPUFEED_EMPTY,
      GPUFEED_STS "2a0a97d02205e45ce2e994789806b19270cfbbb0921b278ccf58f5249ac42102",
      "8318018e0b0f223aa2bbf98705b62bb787dc9c0e678f255a891fd03141be5d85");
  add("post-vanilla", req("POST", "/"),
      "POST\n/\n" GPUFEED_HOST GPUFEED_DATE "\nhost;x-amz-date\n" GPUFEED_EMPTY,
      GPUFEED_STS "553f88c9e4d10fc9e109e2aeb65f030801b70c2f6468faca261d401ae622fc87",
      "5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b");
  add("post-vanilla-query", req("POST", "/", {{"Param1", "value1"}}),
      "POST\n/\nParam1=value1" GPUFEED_HOST GPUFEED_DATE "\nhost;x-amz-date\n" GPUFEED_EMPTY,
      GPUFEED_STS "9d659678c1756bb3113e2ce898845a0a79dbbc57b740555917687f1b3340fbbd",
      "28038455d6de14eafc1f9222cf5aa6f1a96197d7deb8263271d420d138af7f11");
  add("post-header-key-sort", req("POST", "/", {}, {{"My-Header1", "value1"}}),
      "POST\n/\n" GPUFEED_HOST "my-header1:value1\n" GPUFEED_DATE
      "\nhost;my-header1;x-amz-date\n" GPUFEED_EMPTY,
      GPUFEED_STS "9368318c2967cf6de74404b30c65a91e8f6253e0a8659d6d5319f1a812f87d65",
      "c5410059b04c1ee005303aed430f6e6645f61f4dc9e1461ec8f8916fdf18852c",
      "host;my-header1;x-amz-date");
  add("post-header-value-case", req("POST", "/", {}, {{"My-Header1", "VALUE1"}}),
      "POST\n/\n" GPUFEED_HOST "my-header1:VALUE1\n" GPUFEED_DATE
      "\nhost;my-header1;x-amz-date\n" GPUFEED_EMPTY,
      GPUFEED_STS "d51ced243e649e3de6ef63afbbdcbca03131a21a7103a1583706a64618606a93",
      "cdbc9802e29d2942e5e10b5bccfdd67c5f22c7c4e8ae67b53629efa58b974b7d",
      "host;my-header1;x-amz-date");
  // The body "Param1=value1", signed by its hash only (the 2015 suite's form) ...
  auto form = req("POST", "/", {}, {{"Content-Type", "application/x-www-form-urlencoded"}});
  form.payload_hash = form_body_sha256;
  add("post-x-www-form-urlencoded", form,
      "POST\n/\n\ncontent-type:application/"
      "x-www-form-urlencoded\nhost:example.amazonaws.com\n" GPUFEED_DATE
      "\ncontent-type;host;x-amz-"
      "date\n9095672bbd1f56dfc5b65f3e153adc8731a4a654192329106275f4c7b24d0b6e",
      GPUFEED_STS "42a5e5bb34198acb3e84da4f085bb7927f2bc277ca766e6d19c73c2154021281",
      "ff11897932ad3f4e8b18135d722051e5ac45fc38421b1da7b9d196a0fe09473a",
      "content-type;host;x-amz-date");
  // ... and with x-amz-content-sha256 signed too (the suite's signed-body form, as S3 signs).
  for (const char* type :
       {"application/x-www-form-urlencoded", "application/x-www-form-urlencoded; charset=utf-8"}) {
    auto body = req("POST", "/", {}, {{"Content-Type", type}, {"Content-Length", "13"}});
    body.payload_hash = form_body_sha256;
    const bool charset = has(type, "charset");
    c.push_back(
        {charset ? "post-x-www-form-urlencoded-parameters (signed body)"
                 : "post-x-www-form-urlencoded (signed body)",
         body, "", true,
         charset ? "POST\n/\n\ncontent-length:13\ncontent-type:application/x-www-form-urlencoded; "
                   "charset=utf-8\nhost:example.amazonaws.com\nx-amz-content-sha256:"
                   "9095672bbd1f56dfc5b65f3e153adc8731a4a654192329106275f4c7b24d0b6e\n" GPUFEED_DATE
                   "\ncontent-length;content-type;host;x-amz-content-sha256;x-amz-date\n"
                   "9095672bbd1f56dfc5b65f3e153adc8731a4a654192329106275f4c7b24d0b6e"
                 : "POST\n/\n\ncontent-length:13\ncontent-type:application/x-www-form-urlencoded\n"
                   "host:example.amazonaws.com\nx-amz-content-sha256:"
                   "9095672bbd1f56dfc5b65f3e153adc8731a4a654192329106275f4c7b24d0b6e\n" GPUFEED_DATE
                   "\ncontent-length;content-type;host;x-amz-content-sha256;x-amz-date\n"
                   "9095672bbd1f56dfc5b65f3e153adc8731a4a654192329106275f4c7b24d0b6e",
         charset ? GPUFEED_STS "a89f1a5b53e37702ee6363ce1da3ce8f54386f3c8f352ae652153c2982a0bc4d"
                 : GPUFEED_STS "b1edd1d03544c25390e32085d55b57acc9a3961bb59415ff86c45c3d89d16cfb",
         charset ? "328d1b9eaadca9f5818ef05e8392801e091653bafec24fcab71e7344e7f51422"
                 : "d3875051da38690788ef43de4db0d8f280229d82040bfac253562e56c3f20e0b",
         "content-length;content-type;host;x-amz-content-sha256;x-amz-date"});
  }
  // Temporary credentials: the token is signed as x-amz-security-token.
  c.push_back(
      {"get-vanilla with a temporary token (the suite's token case)", req("GET", "/"),
       "6e86291e8372ff2a2260956d9b8aae1d763fbf315fa00fa31553b73ebf194267", false,
       "GET\n/\n" GPUFEED_HOST GPUFEED_DATE
       "x-amz-security-token:6e86291e8372ff2a2260956d9b8aae1d763fbf315fa00fa31553b73ebf194267\n"
       "\nhost;x-amz-date;x-amz-security-token\n" GPUFEED_EMPTY,
       GPUFEED_STS "067b36aa60031588cea4a4cde1f21215227a047690c72247f1d70b32fbbfad2b",
       "07ec1639c89043aa0e3e2de82b96708f198cceab042d4a97044c66dd9f74e7f8",
       "host;x-amz-date;x-amz-security-token"});
  static const std::string sts_creq =
      "POST\n/\n" GPUFEED_HOST GPUFEED_DATE "x-amz-security-token:" + sts_token +
      "\n\nhost;x-amz-date;x-amz-security-token\n" GPUFEED_EMPTY;
  c.push_back({"post-sts-header-before", req("POST", "/"), sts_token, false, sts_creq.c_str(),
               GPUFEED_STS "c237e1b440d4c63c32ca95b5b99481081cb7b13c7e40434868e71567c1a882f6",
               "85d96828115b5dc0cfc3bd16ad9e210dd772bbebba041836c64533a82be05ead",
               "host;x-amz-date;x-amz-security-token"});
  return c;
}

void check_signed(const sigv4_signature& s, const std::string& access_key, const char* scope,
                  const char* creq, const char* sts, const char* sig, const char* signed_headers) {
  CHECK(s.canonical_request == creq);
  CHECK(s.string_to_sign == sts);
  CHECK(s.signature == sig);
  CHECK(s.authorization == "AWS4-HMAC-SHA256 Credential=" + access_key + "/" + scope +
                               ", SignedHeaders=" + signed_headers + ", Signature=" + sig);
}

}  // namespace

TEST_CASE("sigv4: the aws-sig-v4-test-suite, canonical request, string to sign and header") {
  for (const auto& t : suite_cases()) {
    CAPTURE(t.name);
    const auto creds = credentials::from_keys("AKIDEXAMPLE", suite_secret, t.token);
    signing_options o;
    o.content_sha256_header = t.content_sha256;
    const auto s = sign(t.request, creds, {"us-east-1", "service"}, suite_time, o);
    check_signed(s, "AKIDEXAMPLE", "20150830/us-east-1/service/aws4_request", t.canonical_request,
                 t.string_to_sign, t.signature, t.signed_headers);
    REQUIRE(!s.added_headers.empty());
    CHECK(s.added_headers[0].name == "x-amz-date");
    CHECK(s.added_headers[0].value == "20150830T123600Z");
    CHECK(s.added_headers.size() ==
          1u + (t.token.empty() ? 0u : 1u) + (t.content_sha256 ? 1u : 0u));
    if (!t.token.empty()) {
      CHECK(s.added_headers.back().name == "x-amz-security-token");
      CHECK(s.added_headers.back().value == t.token);
    }
  }
}

namespace {

// The S3 documentation's examples: AKIAIOSFODNN7EXAMPLE with its own secret (a '/' where the
// suite's has '+'), us-east-1, 20130524T000000Z, bucket examplebucket at the global endpoint.
const auto s3_doc_creds =
    credentials::from_keys("AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY");
const char* const s3_scope = "20130524/us-east-1/s3/aws4_request";
// The S3 examples' string-to-sign head.
#define GPUFEED_S3_STS "AWS4-HMAC-SHA256\n20130524T000000Z\n20130524/us-east-1/s3/aws4_request\n"

request_to_sign s3_req(const char* method, const char* path, std::vector<query_param> query = {}) {
  request_to_sign r;
  r.method = method;
  r.canonical_uri = uri_encode_path(path);
  r.query = std::move(query);
  r.headers = {{"Host", "examplebucket.s3.amazonaws.com"}};
  return r;
}

}  // namespace

TEST_CASE("sigv4: the S3 documentation's GET Object example (Range: bytes=0-9)") {
  auto r = s3_req("GET", "/test.txt");
  r.headers.push_back({"Range", "bytes=0-9"});
  const auto s = sign(r, s3_doc_creds, {"us-east-1", "s3"}, s3_doc_time);
  check_signed(
      s, "AKIAIOSFODNN7EXAMPLE", s3_scope,
      "GET\n/test.txt\n\nhost:examplebucket.s3.amazonaws.com\nrange:bytes=0-9\n"
      "x-amz-content-sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\n"
      "x-amz-date:20130524T000000Z\n\nhost;range;x-amz-content-sha256;x-amz-date\n"
      "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
      GPUFEED_S3_STS "7344ae5b7ee6c3e7e6b0fe0640412a37625d1fbfff95c48bbb2dc43964946972",
      "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41",
      "host;range;x-amz-content-sha256;x-amz-date");
  // What the request must carry besides its own headers.
  REQUIRE(s.added_headers.size() == 2);
  CHECK(s.added_headers[0].name == "x-amz-date");
  CHECK(s.added_headers[0].value == "20130524T000000Z");
  CHECK(s.added_headers[1].name == "x-amz-content-sha256");
  CHECK(s.added_headers[1].value == empty_payload_sha256);
}

TEST_CASE(
    "sigv4: the same GET signed for the URL s3_url.hpp builds from s3://examplebucket/test.txt") {
  gpufeed::test::temp_dir home("sigv4_home");
  gpufeed::test::env_guard env;
  gpufeed::test::clean_aws_environment(env, home.path().string());
  s3_endpoint_options o;
  o.endpoint_url = "https://s3.amazonaws.com";  // the global endpoint the example uses
  o.addressing = s3_addressing::virtual_hosted;
  const auto url = s3_object_url(resolve_s3_endpoint(o, "us-east-1"),
                                 parse_s3_url("s3://examplebucket/test.txt"));
  CHECK(url.request_url() == "https://examplebucket.s3.amazonaws.com/test.txt");
  request_to_sign r;
  r.canonical_uri = url.path;
  r.headers = {{"Host", url.host_header()}, {"Range", "bytes=0-9"}};
  const auto s = sign(r, s3_doc_creds, {"us-east-1", "s3"}, s3_doc_time);
  CHECK(s.signature == "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
}

TEST_CASE("sigv4: the S3 documentation's PUT Object example ('$' in the key, a body hash)") {
  auto r = s3_req("PUT", "/test$file.text");
  r.headers.push_back({"Date", "Fri, 24 May 2013 00:00:00 GMT"});
  r.headers.push_back({"x-amz-storage-class", "REDUCED_REDUNDANCY"});
  r.payload_hash = sha256_hex("Welcome to Amazon S3.");
  CHECK(r.payload_hash == "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072");
  const auto s = sign(r, s3_doc_creds, {"us-east-1", "s3"}, s3_doc_time);
  check_signed(
      s, "AKIAIOSFODNN7EXAMPLE", s3_scope,
      "PUT\n/test%24file.text\n\ndate:Fri, 24 May 2013 00:00:00 GMT\n"
      "host:examplebucket.s3.amazonaws.com\n"
      "x-amz-content-sha256:44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072\n"
      "x-amz-date:20130524T000000Z\nx-amz-storage-class:REDUCED_REDUNDANCY\n\n"
      "date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class\n"
      "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072",
      GPUFEED_S3_STS "9e0e90d9c76de8fa5b200d8c849cd5b8dc7a3be3951ddb7f6a76b4158342019d",
      "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd",
      "date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class");
}

TEST_CASE("sigv4: the S3 documentation's GET Bucket lifecycle and ListObjects examples") {
  SUBCASE("?lifecycle: a parameter without a value signs as 'lifecycle='") {
    const auto query = parse_query("lifecycle");
    REQUIRE(query);
    const auto s = sign(s3_req("GET", "/", *query), s3_doc_creds, {"us-east-1", "s3"}, s3_doc_time);
    check_signed(
        s, "AKIAIOSFODNN7EXAMPLE", s3_scope,
        "GET\n/\nlifecycle=\nhost:examplebucket.s3.amazonaws.com\n"
        "x-amz-content-sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\n"
        "x-amz-date:20130524T000000Z\n\nhost;x-amz-content-sha256;x-amz-date\n"
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        GPUFEED_S3_STS "9766c798316ff2757b517bc739a67f6213b4ab36dd5da2f94eaebf79c77395ca",
        "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543",
        "host;x-amz-content-sha256;x-amz-date");
  }
  SUBCASE("?max-keys=2&prefix=J") {
    const auto s = sign(s3_req("GET", "/", {{"prefix", "J"}, {"max-keys", "2"}}), s3_doc_creds,
                        {"us-east-1", "s3"}, s3_doc_time);
    check_signed(
        s, "AKIAIOSFODNN7EXAMPLE", s3_scope,
        "GET\n/\nmax-keys=2&prefix=J\nhost:examplebucket.s3.amazonaws.com\n"
        "x-amz-content-sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\n"
        "x-amz-date:20130524T000000Z\n\nhost;x-amz-content-sha256;x-amz-date\n"
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        GPUFEED_S3_STS "df57d21db20da04d7fa30298dd4488ba3a2b47ca3a489c74750e0f1e7df1b9b7",
        "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7",
        "host;x-amz-content-sha256;x-amz-date");
  }
}

TEST_CASE("sigv4: the signing key of AWS's derivation example (20120215/us-east-1/iam)") {
  const secret_text secret(suite_secret);
  CHECK(to_hex(signing_key(secret, "20120215", {"us-east-1", "iam"})) ==
        "f4780e2d9f65fa895f9c67b32ce1baf0b0d8a43505a000a1a9e090d414db404d");
  CHECK(sha256_hex("") == GPUFEED_EMPTY);
  CHECK(empty_payload_sha256 == GPUFEED_EMPTY);
}

TEST_CASE(
    "sigv4: UNSIGNED-PAYLOAD is signed as the payload hash and sent as x-amz-content-sha256") {
  auto r = s3_req("GET", "/test.txt");
  r.payload_hash = std::string(unsigned_payload);
  const auto s = sign(r, s3_doc_creds, {"us-east-1", "s3"}, s3_doc_time);
  CHECK(s.canonical_request ==
        "GET\n/test.txt\n\nhost:examplebucket.s3.amazonaws.com\n"
        "x-amz-content-sha256:UNSIGNED-PAYLOAD\nx-amz-date:20130524T000000Z\n\n"
        "host;x-amz-content-sha256;x-amz-date\nUNSIGNED-PAYLOAD");
  CHECK(s.string_to_sign == GPUFEED_S3_STS + sha256_hex(s.canonical_request));
  REQUIRE(s.added_headers.size() == 2);
  CHECK(s.added_headers[1].value == "UNSIGNED-PAYLOAD");
  // The signature is the HMAC of this string to sign under the day's key, and differs from the
  // empty body's.
  const auto key = signing_key(s3_doc_creds.secret_access_key(), "20130524", {"us-east-1", "s3"});
  CHECK(s.signature == to_hex(hmac_sha256(key, s.string_to_sign)));
  const auto empty =
      sign(s3_req("GET", "/test.txt"), s3_doc_creds, {"us-east-1", "s3"}, s3_doc_time);
  CHECK(s.signature != empty.signature);
}

TEST_CASE("sigv4: x-amz-date is the UTC time in ISO 8601 basic form") {
  CHECK(amz_date(suite_time) == "20150830T123600Z");
  CHECK(amz_date(s3_doc_time) == "20130524T000000Z");
  CHECK(amz_date(std::chrono::sys_days{std::chrono::year{1999} / 12 / 31} + 23h + 59min + 59s) ==
        "19991231T235959Z");
  const std::string now = amz_date(utc_now());
  REQUIRE(now.size() == 16);
  CHECK(now[8] == 'T');
  CHECK(now[15] == 'Z');
  CHECK(now.substr(0, 2) == "20");
}

TEST_CASE("sigv4: requests it will not sign are config_errors") {
  const auto creds = credentials::from_keys("AKIDEXAMPLE", suite_secret);
  request_to_sign no_host;
  no_host.headers = {{"Range", "bytes=0-9"}};
  CHECK(has(error_of<config_error>([&] {
              (void)sign(no_host, creds, {"us-east-1", "s3"}, suite_time);
            }),
            "Host header"));
  CHECK(has(error_of<config_error>([&] {
              (void)sign(req("GET", "/"), credentials{}, {"us-east-1", "s3"}, suite_time);
            }),
            "anonymous"));
  CHECK(has(error_of<config_error>([&] {
              (void)sign(req("GET", "/"), creds, {"", "s3"}, suite_time);
            }),
            "region"));
  auto dated = req("GET", "/", {}, {{"X-Amz-Date", "20150830T123600Z"}});
  CHECK(has(error_of<config_error>([&] {
              (void)sign(dated, creds, {"us-east-1", "s3"}, suite_time);
            }),
            "x-amz-date"));
  auto bad = req("GET", "/", {}, {{"Bad Name", "v"}});
  CHECK(has(error_of<config_error>([&] {
              (void)sign(bad, creds, {"us-east-1", "s3"}, suite_time);
            }),
            "invalid HTTP header name"));
}
