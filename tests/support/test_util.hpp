// Shared helpers for gpufeed's tests.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>

namespace gpufeed::test {

// A fresh, empty directory for one test, removed on destruction. Lives under
// $GPUFEED_TEST_TMPDIR (set by CTest to the build tree) or the system temp directory.
class temp_dir {
 public:
  explicit temp_dir(const std::string& tag = "t") {
    const char* base = std::getenv("GPUFEED_TEST_TMPDIR");
    std::filesystem::path root = base ? base : std::filesystem::temp_directory_path();
    std::random_device rd;
    path_ = root / ("gpufeed-" + tag + "-" + std::to_string(rd()) + std::to_string(rd()));
    std::filesystem::create_directories(path_);
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  ~temp_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  [[nodiscard]] const std::filesystem::path& path() const noexcept { return path_; }
  [[nodiscard]] std::filesystem::path operator/(const std::string& name) const {
    return path_ / name;
  }

 private:
  std::filesystem::path path_;
};

}  // namespace gpufeed::test
