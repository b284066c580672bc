// Counting this process's open descriptors on files under a directory (lazy shard opening).
#pragma once

#include <sys/resource.h>

#include <filesystem>
#include <stdexcept>
#include <string>
#include <system_error>

namespace gpufeed::test {

// Descriptors of this process open on files under `dir` (a canonical path).
inline int fds_under(const std::filesystem::path& dir) {
  int n = 0;
  std::error_code ec;
  for (std::filesystem::directory_iterator it("/proc/self/fd", ec), end; !ec && it != end;
       it.increment(ec)) {
    const auto target = std::filesystem::read_symlink(it->path(), ec);
    if (!ec && target.string().rfind(dir.string(), 0) == 0) ++n;
  }
  return n;
}

// RLIMIT_NOFILE's soft limit lowered to `above` more than the descriptors open now (new
// descriptors take the lowest free numbers, so `above` more can be opened); restored at scope
// exit.
class low_fd_limit {
 public:
  explicit low_fd_limit(rlim_t above) {
    if (::getrlimit(RLIMIT_NOFILE, &saved_) != 0) throw std::runtime_error("test: getrlimit");
    rlimit r = saved_;
    rlim_t open = 0;
    for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd"))
      ++open;
    r.rlim_cur = open + above;
    if (::setrlimit(RLIMIT_NOFILE, &r) != 0) throw std::runtime_error("test: setrlimit");
  }
  low_fd_limit(const low_fd_limit&) = delete;
  low_fd_limit& operator=(const low_fd_limit&) = delete;
  ~low_fd_limit() { ::setrlimit(RLIMIT_NOFILE, &saved_); }

 private:
  rlimit saved_{};
};

}  // namespace gpufeed::test
