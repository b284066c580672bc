// AWS credentials and region (gpufeed/detail/remote/credentials.hpp, profile_file.hpp), found
// the way the AWS CLI finds them, in an environment and files each test case makes (HOME and
// every AWS_* variable set or unset, and restored afterwards): environment keys, profiles of
// the shared credentials and config files (comments, blanks, CRLF, sub-properties), temporary
// tokens, a missing or half-written profile, unreadable and malformed files, anonymous access,
// and the region's order. Secrets never show: describe() and every message are searched for the
// secret keys and tokens the files and variables hold.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <ostream>
#include <string>
#include <type_traits>

#include "gpufeed/detail/remote/credentials.hpp"
#include "gpufeed/error.hpp"
#include "env_guard.hpp"
#include "expect_error.hpp"
#include "test_util.hpp"

using namespace gpufeed::detail::remote;
using gpufeed::config_error;
using gpufeed::test::error_of;
using gpufeed::test::has;
namespace fs = std::filesystem;

namespace {

template <class T>
concept streamable = requires(std::ostream& os, const T& t) {
  os << t;
};

// Neither the credentials nor their secrets can be printed or turned into a string.
static_assert(!streamable<credentials>);
static_assert(!streamable<secret_text>);
static_assert(!std::is_convertible_v<secret_text, std::string>);
static_assert(!std::is_convertible_v<secret_text, std::string_view>);

const std::string env_secret = "EnvSecretKeyDoNotPrint0000000000000000000";
const std::string env_token = "EnvTokenDoNotPrintFQoGZXIvYXdzEXAMPLE";
const std::string default_secret = "DefaultSecretDoNotPrint/K7MDENG+bPxRfiCY";
const std::string dev_secret = "DevSecretDoNotPrint/K7MDENG+bPxRfiCYEXAM";
const std::string dev_token = "DevTokenDoNotPrintIQoJb3JpZ2luX2VjEXAMPLE";
const std::string config_secret = "ConfigSecretDoNotPrint/MDENG+bPxRfiCYEXAM";

// Fails the case when `text` holds any secret this file writes.
void check_no_secret(const std::string& text) {
  CAPTURE(text);
  for (const std::string& s :
       {env_secret, env_token, default_secret, dev_secret, dev_token, config_secret}) {
    CHECK(!has(text, s));
    CHECK(!has(text, s.substr(0, 12)));
  }
}

void write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << text;
}

// A credentials file with what users write: comments of both kinds, blanks around '=', an
// inline comment, CRLF line ends, a section header with spaces inside the brackets.
std::string credentials_text() {
  return "# AWS credentials\r\n"
         "[default]\r\n"
         "aws_access_key_id = AKIADEFAULTKEY1234\r\n"
         "aws_secret_access_key=" +
         default_secret +
         "\r\n"
         "\r\n"
         "; the development account\n"
         "[ dev ]   # temporary\n"
         "  AWS_Access_Key_ID   =   ASIADEVKEY5678   # inline comment\n"
         "aws_secret_access_key = " +
         dev_secret +
         "\n"
         "aws_session_token = " +
         dev_token +
         "\n"
         "[half]\n"
         "aws_access_key_id = AKIAHALF0000\n"
         "[assumed]\n"
         "role_arn = arn:aws:iam::123456789012:role/reader\n"
         "source_profile = default\n";
}

std::string config_text() {
  return "[default]\n"
         "region = eu-central-1\n"
         "[profile dev]\n"
         "region = ap-southeast-2\n"
         "s3 =\n"
         "  addressing_style = path\n"
         "  max_concurrent_requests = 20\n"
         "[profile cfgonly]\n"
         "aws_access_key_id = AKIACONFIGKEY9999\n"
         "aws_secret_access_key = " +
         config_secret +
         "\n"
         "[cfgonly]\n"
         "region = not-a-profile-section\n";
}

// A fresh HOME with no AWS set-up and no AWS_* variable; restored when it goes.
struct clean_home {
  gpufeed::test::temp_dir dir{"creds_home"};
  gpufeed::test::env_guard env;
  clean_home() { gpufeed::test::clean_aws_environment(env, dir.path().string()); }
  [[nodiscard]] fs::path aws(const char* name) const { return dir.path() / ".aws" / name; }
  void write_both() {
    write(aws("credentials"), credentials_text());
    write(aws("config"), config_text());
  }
};

}  // namespace

TEST_CASE("credentials: nothing configured is anonymous access, not an error") {
  clean_home h;
  const auto c = resolve_credentials();
  CHECK(c.anonymous());
  CHECK(c.origin() == credential_origin::anonymous);
  CHECK(c.describe() == "anonymous (no AWS credentials found; requests are not signed)");
  const auto r = resolve_region();
  CHECK(r.region == "us-east-1");
  CHECK(r.origin == "the default");
  // A config file with only a region still means anonymous access.
  write(h.aws("config"), "[default]\nregion = eu-west-3\n");
  CHECK(resolve_credentials().anonymous());
  CHECK(resolve_region().region == "eu-west-3");
}

TEST_CASE("credentials: the environment's keys and token come first") {
  clean_home h;
  h.write_both();
  h.env.set("AWS_ACCESS_KEY_ID", "AKIAENVKEYABCD");
  h.env.set("AWS_SECRET_ACCESS_KEY", env_secret);
  auto c = resolve_credentials();
  CHECK(c.origin() == credential_origin::environment);
  CHECK(c.access_key_id() == "AKIAENVKEYABCD");
  CHECK(c.secret_access_key().reveal() == env_secret);
  CHECK(c.security_token().empty());
  CHECK(c.describe() == "AWS access key ...ABCD from the environment (AWS_ACCESS_KEY_ID)");

  h.env.set("AWS_SESSION_TOKEN", env_token);
  h.env.set("AWS_PROFILE", "dev");  // the environment's keys still win, as with the CLI
  c = resolve_credentials();
  CHECK(c.origin() == credential_origin::environment);
  CHECK(c.security_token().reveal() == env_token);
  CHECK(c.describe() ==
        "AWS access key ...ABCD from the environment (AWS_ACCESS_KEY_ID), with a temporary token");
  check_no_secret(c.describe());
  CHECK(!has(c.describe(), "AKIAENVKEYABCD"));

  // A profile the caller names skips the environment.
  credential_options o;
  o.profile = "dev";
  CHECK(resolve_credentials(o).access_key_id() == "ASIADEVKEY5678");
}

TEST_CASE("credentials: half a key pair in the environment is a config_error naming the other") {
  clean_home h;
  h.env.set("AWS_SECRET_ACCESS_KEY", env_secret);
  std::string what = error_of<config_error>([] { (void)resolve_credentials(); });
  CHECK(has(what, "AWS_SECRET_ACCESS_KEY is set but AWS_ACCESS_KEY_ID is not"));
  check_no_secret(what);
  h.env.unset("AWS_SECRET_ACCESS_KEY");
  h.env.set("AWS_ACCESS_KEY_ID", "AKIAENVKEYABCD");
  what = error_of<config_error>([] { (void)resolve_credentials(); });
  CHECK(has(what, "AWS_ACCESS_KEY_ID is set but AWS_SECRET_ACCESS_KEY is not"));
}

TEST_CASE("credentials: the shared credentials file, default profile and AWS_PROFILE's") {
  clean_home h;
  h.write_both();
  const std::string file = h.aws("credentials").string();
  auto c = resolve_credentials();
  CHECK(c.origin() == credential_origin::credentials_file);
  CHECK(c.access_key_id() == "AKIADEFAULTKEY1234");
  CHECK(c.secret_access_key().reveal() == default_secret);
  CHECK(c.security_token().empty());
  CHECK(c.describe() == "AWS access key ...1234 from profile 'default' in '" + file + "'");

  h.env.set("AWS_PROFILE", "dev");
  c = resolve_credentials();
  CHECK(c.access_key_id() == "ASIADEVKEY5678");
  CHECK(c.secret_access_key().reveal() == dev_secret);
  CHECK(c.security_token().reveal() == dev_token);
  CHECK(c.describe() ==
        "AWS access key ...5678 from profile 'dev' in '" + file + "', with a temporary token");
  check_no_secret(c.describe());
}

TEST_CASE("credentials: AWS_SHARED_CREDENTIALS_FILE and AWS_CONFIG_FILE move the files") {
  clean_home h;
  write(h.dir.path() / "elsewhere" / "creds.ini", credentials_text());
  write(h.dir.path() / "elsewhere" / "conf.ini", config_text());
  h.env.set("AWS_SHARED_CREDENTIALS_FILE", "~/elsewhere/creds.ini");  // "~/" is HOME
  h.env.set("AWS_CONFIG_FILE", (h.dir.path() / "elsewhere" / "conf.ini").string());
  CHECK(credentials_file_path() == (h.dir.path() / "elsewhere" / "creds.ini").string());
  CHECK(resolve_credentials().access_key_id() == "AKIADEFAULTKEY1234");
  CHECK(resolve_region().region == "eu-central-1");
}

TEST_CASE("credentials: keys in the config file's [profile name] section") {
  clean_home h;
  h.write_both();
  h.env.set("AWS_PROFILE", "cfgonly");
  const auto c = resolve_credentials();
  CHECK(c.origin() == credential_origin::config_file);
  CHECK(c.access_key_id() == "AKIACONFIGKEY9999");
  CHECK(c.secret_access_key().reveal() == config_secret);
  CHECK(c.describe() ==
        "AWS access key ...9999 from profile 'cfgonly' in '" + h.aws("config").string() + "'");
}

TEST_CASE("credentials: a profile AWS_PROFILE names but no file holds is a config_error") {
  clean_home h;
  h.write_both();
  h.env.set("AWS_PROFILE", "prod");
  const std::string what = error_of<config_error>([] { (void)resolve_credentials(); });
  CHECK(has(what, "AWS profile 'prod' not found"));
  CHECK(has(what, h.aws("credentials").string()));
  CHECK(has(what, h.aws("config").string()));
  check_no_secret(what);
  // "[cfgonly]" in the config file is not a profile (profiles there are "[profile name]").
  write(h.aws("credentials"), "[other]\n");
  write(h.aws("config"), "[prod]\nregion = us-west-1\n");
  CHECK(has(error_of<config_error>([] { (void)resolve_credentials(); }), "'prod' not found"));
  // Without the files the message says they are missing.
  fs::remove(h.aws("credentials"));
  CHECK(has(error_of<config_error>([] { (void)resolve_credentials(); }), "(no such file)"));
  // Not named: the default profile missing is anonymous access.
  h.env.unset("AWS_PROFILE");
  CHECK(resolve_credentials().anonymous());
}

TEST_CASE("credentials: half-written and role profiles are config_errors naming file and profile") {
  clean_home h;
  h.write_both();
  h.env.set("AWS_PROFILE", "half");
  std::string what = error_of<config_error>([] { (void)resolve_credentials(); });
  CHECK(has(what, "profile 'half' in '" + h.aws("credentials").string() + "'"));
  CHECK(has(what, "aws_access_key_id but not aws_secret_access_key"));
  check_no_secret(what);
  h.env.set("AWS_PROFILE", "assumed");
  what = error_of<config_error>([] { (void)resolve_credentials(); });
  CHECK(has(what, "profile 'assumed'"));
  CHECK(has(what, "role_arn, which gpufeed does not support"));
  check_no_secret(what);
}

TEST_CASE(
    "credentials: an unreadable or malformed file is a config_error naming it, no line text") {
  clean_home h;
  fs::create_directories(h.aws("credentials"));  // a directory where the file should be
  std::string what = error_of<config_error>([] { (void)resolve_credentials(); });
  CHECK(has(what, "cannot read AWS profile file"));
  CHECK(has(what, h.aws("credentials").string()));
  fs::remove(h.aws("credentials"));

  write(h.aws("credentials"),
        "[default]\naws_access_key_id = AKIA1\naws_secret_access_key " + default_secret + "\n");
  what = error_of<config_error>([] { (void)resolve_credentials(); });
  CHECK(has(what, "malformed AWS profile file: line 3"));
  CHECK(has(what, h.aws("credentials").string()));
  check_no_secret(what);

  write(h.aws("credentials"), "[default\naws_access_key_id = AKIA1\n");
  what = error_of<config_error>([] { (void)resolve_credentials(); });
  CHECK(has(what, "line 1 is a section header without its closing ']'"));
}

TEST_CASE("profile files: sections, case-blind names, sub-properties, continuations, comments") {
  const auto f = parse_profile_file(config_text() +
                                        "[profile  spaced   name]\n"
                                        "note = first\n"
                                        "  second line\n"
                                        "key = a#b ;c # comment\n",
                                    "test.ini");
  CHECK(f.exists);
  const auto* dev = f.section("profile dev");
  REQUIRE(dev);
  CHECK(dev->at("region") == "ap-southeast-2");
  CHECK(dev->at("s3") == "");
  CHECK(dev->at("s3.addressing_style") == "path");
  CHECK(dev->at("s3.max_concurrent_requests") == "20");
  const auto* spaced = f.section("profile spaced name");
  REQUIRE(spaced);
  CHECK(spaced->at("note") == "first\nsecond line");
  CHECK(spaced->at("key") == "a#b");
  CHECK(parse_profile_file("orphan = 1\n[s]\nx=2\n", "t").sections.size() == 1);
  const auto missing =
      read_profile_file((fs::temp_directory_path() / "gpufeed-none" / "x").string());
  CHECK(!missing.exists);
  CHECK(missing.sections.empty());
}

TEST_CASE("region: AWS_REGION, then AWS_DEFAULT_REGION, then the profile's, then us-east-1") {
  clean_home h;
  h.write_both();
  auto r = resolve_region();
  CHECK(r.region == "eu-central-1");
  CHECK(r.origin == "profile 'default' in '" + h.aws("config").string() + "'");
  h.env.set("AWS_PROFILE", "dev");
  CHECK(resolve_region().region == "ap-southeast-2");
  h.env.set("AWS_PROFILE", "cfgonly");  // no region of its own: the default's is not inherited
  CHECK(resolve_region().region == "us-east-1");
  h.env.set("AWS_DEFAULT_REGION", "sa-east-1");
  r = resolve_region();
  CHECK(r.region == "sa-east-1");
  CHECK(r.origin == "AWS_DEFAULT_REGION");
  h.env.set("AWS_REGION", "af-south-1");
  r = resolve_region();
  CHECK(r.region == "af-south-1");
  CHECK(r.origin == "AWS_REGION");
  credential_options o;
  o.profile = "dev";
  CHECK(resolve_region(o).region == "af-south-1");
}

TEST_CASE("credentials: the caller's keys, copied and moved, describe without their secret") {
  auto c = credentials::from_keys("AKIDEXAMPLE", dev_secret, dev_token);
  CHECK(c.describe() == "AWS access key ...MPLE given by the caller, with a temporary token");
  const credentials copy = c;
  CHECK(copy.secret_access_key().reveal() == dev_secret);
  credentials moved = std::move(c);
  CHECK(moved.security_token().reveal() == dev_token);
  moved = copy;
  CHECK(moved.access_key_id() == "AKIDEXAMPLE");
  check_no_secret(moved.describe());
  CHECK(credentials::from_keys("AK", "s").describe() ==
        "AWS access key (short id) given by the caller");
  CHECK(has(error_of<config_error>([] { (void)credentials::from_keys("AKIDEXAMPLE", ""); }),
            "both an access key id and a secret access key"));
  CHECK(has(error_of<config_error>([] { (void)credentials::from_keys("", dev_secret); }),
            "both an access key id and a secret access key"));
}
