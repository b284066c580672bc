// gpufeed — AWS credentials and region, found where the AWS CLI finds them.
//
// Credentials, first found wins:
//   1. the environment: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (both, or a config_error
//      naming the one missing), with AWS_SESSION_TOKEN for temporary credentials; skipped when
//      the caller names a profile itself (credential_options::profile), as the CLI's --profile
//      does;
//   2. the profile's keys (aws_access_key_id, aws_secret_access_key, aws_session_token) in the
//      shared credentials file (AWS_SHARED_CREDENTIALS_FILE, else ~/.aws/credentials; section
//      "[name]"), else in the config file (AWS_CONFIG_FILE, else ~/.aws/config; section
//      "[profile name]", or "[default]"). The profile is the caller's, else AWS_PROFILE, else
//      "default";
//   3. none: anonymous access, an explicit state and not an error, so that public buckets read
//      without an account. A profile that AWS_PROFILE (or the caller) names but no file holds is
//      a config_error, as is a profile that gets its credentials some other way (role_arn,
//      credential_process, SSO, web identity), which gpufeed does not implement.
// Region: AWS_REGION, else AWS_DEFAULT_REGION, else the profile's "region" in the config file,
// else us-east-1.
//
// Secrets stay secret: the secret key and the token live in secret_text, which has no
// operator<<, no conversion to string and is wiped when destroyed; credentials::describe() shows
// the access key id's last 4 characters and where the keys came from; no message names a value.
#pragma once

#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>

#include "gpufeed/detail/remote/digest.hpp"
#include "gpufeed/detail/remote/profile_file.hpp"
#include "gpufeed/error.hpp"

namespace gpufeed::detail::remote {

// A secret string: readable only through reveal(), never streamed or converted, wiped from memory
// when destroyed or overwritten.
class secret_text {
 public:
  secret_text() = default;
  explicit secret_text(std::string value) noexcept : value_(std::move(value)) {}
  secret_text(const secret_text&) = default;
  secret_text(secret_text&&) noexcept = default;
  secret_text& operator=(const secret_text& o) {
    if (this != &o) {
      clear();
      value_ = o.value_;
    }
    return *this;
  }
  secret_text& operator=(secret_text&& o) noexcept {
    std::swap(value_, o.value_);
    return *this;
  }
  ~secret_text() { clear(); }

  // The secret itself, for signing; never for a message.
  [[nodiscard]] std::string_view reveal() const noexcept { return value_; }
  [[nodiscard]] bool empty() const noexcept { return value_.empty(); }

 private:
  void clear() noexcept {
    value_.resize(value_.capacity());  // within capacity: no allocation, whole buffer wiped
    wipe(value_.data(), value_.size());
    value_.clear();
  }
  std::string value_;
};

// Where credentials came from.
enum class credential_origin { anonymous, environment, credentials_file, config_file, caller };

class credentials {
 public:
  // Anonymous: requests go unsigned.
  credentials() = default;

  // Keys the caller holds; `where` says where they came from in describe() ("" for the caller).
  // config_error when the id or the secret is empty (anonymous access is the default
  // constructor, never half a key pair).
  static credentials from_keys(std::string access_key_id, std::string secret_access_key,
                               std::string security_token = {},
                               credential_origin origin = credential_origin::caller,
                               std::string where = {}) {
    if (access_key_id.empty() || secret_access_key.empty())
      throw config_error("AWS credentials need both an access key id and a secret access key");
    credentials c;
    c.access_key_id_ = std::move(access_key_id);
    c.secret_ = secret_text(std::move(secret_access_key));
    c.token_ = secret_text(std::move(security_token));
    c.origin_ = origin;
    c.where_ = std::move(where);
    return c;
  }

  [[nodiscard]] bool anonymous() const noexcept { return origin_ == credential_origin::anonymous; }
  [[nodiscard]] credential_origin origin() const noexcept { return origin_; }
  // The access key id is sent in every Authorization header; describe() still shows only its end.
  [[nodiscard]] const std::string& access_key_id() const noexcept { return access_key_id_; }
  [[nodiscard]] const secret_text& secret_access_key() const noexcept { return secret_; }
  // Temporary credentials' token (sent as x-amz-security-token); empty for long-term keys.
  [[nodiscard]] const secret_text& security_token() const noexcept { return token_; }

  // "AWS access key ...MPLE from the environment (AWS_ACCESS_KEY_ID), with a temporary token",
  // "AWS access key ...MPLE from profile 'dev' in '<file>'", or "anonymous (no AWS credentials
  // found; requests are not signed)". Never the secret key or the token.
  [[nodiscard]] std::string describe() const {
    if (anonymous()) return "anonymous (no AWS credentials found; requests are not signed)";
    const std::string& id = access_key_id_;
    std::string s = "AWS access key " +
                    (id.size() > 4 ? "..." + id.substr(id.size() - 4) : std::string("(short id)"));
    switch (origin_) {
      case credential_origin::environment:
        s += " from the environment (AWS_ACCESS_KEY_ID)";
        break;
      case credential_origin::credentials_file:
      case credential_origin::config_file:
        s += " from " + where_;
        break;
      default:
        s += where_.empty() ? " given by the caller" : " from " + where_;
        break;
    }
    if (!token_.empty()) s += ", with a temporary token";
    return s;
  }

 private:
  std::string access_key_id_;
  secret_text secret_;
  secret_text token_;
  credential_origin origin_ = credential_origin::anonymous;
  std::string where_;
};

struct credential_options {
  // The profile to read; empty: AWS_PROFILE, else "default". Naming one here skips the
  // environment's keys (as the CLI's --profile does) and makes a missing profile an error.
  std::string profile;
};

// The value of environment variable `name`, or "" when it is unset or empty.
[[nodiscard]] inline std::string aws_env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

// `override_var`'s value, else $HOME/.aws/<name> ("" when HOME is unset too); a leading "~/" is
// HOME, as the CLI expands it.
[[nodiscard]] inline std::string aws_file_path(const char* override_var, const char* name) {
  std::string p = aws_env(override_var);
  const std::string home = aws_env("HOME");
  if (p.empty()) return home.empty() ? std::string() : home + "/.aws/" + name;
  if (p.rfind("~/", 0) == 0 && !home.empty()) p = home + p.substr(1);
  return p;
}

[[nodiscard]] inline std::string credentials_file_path() {
  return aws_file_path("AWS_SHARED_CREDENTIALS_FILE", "credentials");
}
[[nodiscard]] inline std::string config_file_path() {
  return aws_file_path("AWS_CONFIG_FILE", "config");
}

// The profile asked for, and whether it was asked for by name (not the "default" fallback).
[[nodiscard]] inline std::pair<std::string, bool> chosen_profile(const credential_options& o) {
  if (!o.profile.empty()) return {o.profile, true};
  std::string p = aws_env("AWS_PROFILE");
  if (!p.empty()) return {p, true};
  return {"default", false};
}

// The file at `path`, or a missing one when there is no path.
[[nodiscard]] inline profile_file read_optional_profile_file(const std::string& path) {
  if (path.empty()) return profile_file{};
  return read_profile_file(path);
}

// The section of the config file that holds `profile`: "[profile name]", or for "default"
// "[default]" (or "[profile default]").
[[nodiscard]] inline const profile_properties* config_section(const profile_file& f,
                                                              const std::string& profile) {
  if (const auto* s = f.section("profile " + profile)) return s;
  return profile == "default" ? f.section("default") : nullptr;
}

// The credentials a profile section holds; anonymous when it holds no keys.
// config_error naming the file and the profile for half a key pair, or for a way of getting
// credentials gpufeed does not implement.
[[nodiscard]] inline credentials profile_credentials(const profile_properties& p,
                                                     const std::string& profile,
                                                     const std::string& path,
                                                     credential_origin origin) {
  const auto get = [&p](const char* key) {
    const auto it = p.find(key);
    return it == p.end() ? std::string() : it->second;
  };
  const std::string where = "profile '" + profile + "' in '" + path + "'";
  std::string id = get("aws_access_key_id");
  std::string secret = get("aws_secret_access_key");
  if (id.empty() != secret.empty())
    throw config_error("AWS " + where + " sets " +
                           (id.empty() ? "aws_secret_access_key but not aws_access_key_id"
                                       : "aws_access_key_id but not aws_secret_access_key"),
                       file_context(path));
  if (id.empty()) {
    for (const char* other : {"role_arn", "credential_process", "sso_start_url", "sso_session",
                              "web_identity_token_file", "credential_source"})
      if (p.count(other))
        throw config_error("AWS " + where + " gets its credentials through " + other +
                               ", which gpufeed does not support: set aws_access_key_id and "
                               "aws_secret_access_key, or AWS_ACCESS_KEY_ID and "
                               "AWS_SECRET_ACCESS_KEY",
                           file_context(path));
    return credentials{};
  }
  std::string token = get("aws_session_token");
  if (token.empty()) token = get("aws_security_token");
  return credentials::from_keys(std::move(id), std::move(secret), std::move(token), origin, where);
}

// The credentials to sign with (see the top for the order); anonymous when there are none.
[[nodiscard]] inline credentials resolve_credentials(const credential_options& options = {}) {
  if (options.profile.empty()) {
    std::string id = aws_env("AWS_ACCESS_KEY_ID");
    std::string secret = aws_env("AWS_SECRET_ACCESS_KEY");
    if (id.empty() != secret.empty())
      throw config_error(id.empty() ? "AWS_SECRET_ACCESS_KEY is set but AWS_ACCESS_KEY_ID is not"
                                    : "AWS_ACCESS_KEY_ID is set but AWS_SECRET_ACCESS_KEY is not");
    if (!id.empty()) {
      std::string token = aws_env("AWS_SESSION_TOKEN");
      if (token.empty()) token = aws_env("AWS_SECURITY_TOKEN");
      return credentials::from_keys(std::move(id), std::move(secret), std::move(token),
                                    credential_origin::environment);
    }
  }
  const auto [profile, named] = chosen_profile(options);
  const profile_file creds = read_optional_profile_file(credentials_file_path());
  if (const auto* s = creds.section(profile)) {
    credentials c =
        profile_credentials(*s, profile, creds.path, credential_origin::credentials_file);
    if (!c.anonymous()) return c;
  }
  const profile_file config = read_optional_profile_file(config_file_path());
  if (const auto* s = config_section(config, profile)) {
    credentials c = profile_credentials(*s, profile, config.path, credential_origin::config_file);
    if (!c.anonymous()) return c;
  }
  if (named && !creds.section(profile) && !config_section(config, profile)) {
    const auto where = [](const profile_file& f) {
      return f.path.empty() ? std::string("(no HOME)")
                            : "'" + f.path + "'" + (f.exists ? "" : " (no such file)");
    };
    throw config_error("AWS profile '" + profile + "' not found in the credentials file " +
                           where(creds) + " or the config file " + where(config),
                       file_context(creds.path.empty() ? config.path : creds.path));
  }
  return credentials{};
}

// The region requests are signed for and addressed in, and where it came from.
struct region_choice {
  std::string region;
  std::string origin;  // "AWS_REGION", "AWS_DEFAULT_REGION", "profile 'dev' in '<file>'", ...
};

// The region (see the top for the order). config_error only when the config file cannot be read.
[[nodiscard]] inline region_choice resolve_region(const credential_options& options = {}) {
  for (const char* var : {"AWS_REGION", "AWS_DEFAULT_REGION"})
    if (std::string r = aws_env(var); !r.empty()) return {std::move(r), var};
  const std::string profile = chosen_profile(options).first;
  const profile_file config = read_optional_profile_file(config_file_path());
  if (const auto* s = config_section(config, profile)) {
    if (const auto it = s->find("region"); it != s->end() && !it->second.empty())
      return {it->second, "profile '" + profile + "' in '" + config.path + "'"};
  }
  return {"us-east-1", "the default"};
}

}  // namespace gpufeed::detail::remote
