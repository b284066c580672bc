// Shared by the remote tests: environment variables set or unset for one test case and restored
// when it ends, and an AWS environment with nothing in it but a fresh HOME.
#pragma once

#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace gpufeed::test {

// Sets and unsets environment variables; the destructor puts back every one it touched, as it
// was before the first change.
class env_guard {
 public:
  env_guard() = default;
  env_guard(const env_guard&) = delete;
  env_guard& operator=(const env_guard&) = delete;
  ~env_guard() {
    for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) {
      if (it->second)
        ::setenv(it->first.c_str(), it->second->c_str(), 1);
      else
        ::unsetenv(it->first.c_str());
    }
  }

  void set(const std::string& name, const std::string& value) {
    remember(name);
    ::setenv(name.c_str(), value.c_str(), 1);
  }
  void unset(const std::string& name) {
    remember(name);
    ::unsetenv(name.c_str());
  }

 private:
  void remember(const std::string& name) {
    for (const auto& s : saved_)
      if (s.first == name) return;
    const char* v = std::getenv(name.c_str());
    saved_.emplace_back(name, v ? std::optional<std::string>(v) : std::nullopt);
  }
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

// Every variable the remote code reads, unset, and HOME set to `home`: the test starts from a
// machine with no AWS set-up at all, whatever the one running it has.
inline void clean_aws_environment(env_guard& env, const std::string& home) {
  for (const char* v :
       {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN",
        "AWS_PROFILE", "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE", "AWS_REGION",
        "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"})
    env.unset(v);
  env.set("HOME", home);
}

}  // namespace gpufeed::test
