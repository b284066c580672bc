// Counting this process's open descriptors on files under a directory (lazy shard opening).
#pragma once

#include <filesystem>
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

}  // namespace gpufeed::test
