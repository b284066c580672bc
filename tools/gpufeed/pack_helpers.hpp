// gpufeed pack's helpers: stopping on SIGINT / SIGTERM, which files of a directory are packed,
// and the bytes the shards take on disk.
#pragma once

#include <fnmatch.h>
#include <signal.h>

#include <algorithm>
#include <csignal>
#include <cstdint>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

namespace gpufeed::cli {

// SIGINT / SIGTERM while packing: remembered here, asked by pack between batches (its
// `cancelled`), which then removes what it wrote. SA_RESETHAND: a second signal acts as usual.
inline volatile std::sig_atomic_t stop_signal = 0;
extern "C" inline void on_stop_signal(int sig) { stop_signal = sig; }

class stop_signals {
 public:
  stop_signals() {
    struct sigaction sa {};
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESETHAND | SA_RESTART;
    ::sigaction(SIGINT, &sa, &old_int_);
    ::sigaction(SIGTERM, &sa, &old_term_);
  }
  ~stop_signals() {
    ::sigaction(SIGINT, &old_int_, nullptr);
    ::sigaction(SIGTERM, &old_term_, nullptr);
  }
  stop_signals(const stop_signals&) = delete;
  stop_signals& operator=(const stop_signals&) = delete;

 private:
  struct sigaction old_int_ {}, old_term_ {};
};

// A name is packed unless a part of it is hidden (.DS_Store, .git/...), it matches an --exclude
// glob, or --include globs are given and it matches none ('*' crosses '/').
inline bool wanted(const std::string& name, const std::vector<std::string>& include,
                   const std::vector<std::string>& exclude) {
  if (name.starts_with(".") || name.find("/.") != std::string::npos) return false;
  const auto any = [&](const std::vector<std::string>& globs) {
    return std::any_of(globs.begin(), globs.end(), [&](const std::string& g) {
      return ::fnmatch(g.c_str(), name.c_str(), 0) == 0;
    });
  };
  return !any(exclude) && (include.empty() || any(include));
}

// Bytes the shards take on disk (an LMDB shard: its directory's files).
inline std::uint64_t disk_bytes(const std::vector<std::filesystem::path>& shards) {
  std::uint64_t n = 0;
  std::error_code ec;
  for (const auto& s : shards) {
    if (std::filesystem::is_directory(s, ec)) {
      for (const auto& e : std::filesystem::directory_iterator(s, ec))
        if (e.is_regular_file(ec)) n += e.file_size(ec);
    } else {
      n += std::filesystem::file_size(s, ec);
    }
  }
  return n;
}

}  // namespace gpufeed::cli
