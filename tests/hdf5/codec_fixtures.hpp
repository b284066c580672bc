// Test helper: the h5py-written codec fixtures (make_codec_fixtures.py), for the tests whose
// target defines GPUFEED_TEST_PYTHON and GPUFEED_CODEC_FIXTURES (tests/hdf5/CMakeLists.txt).
#pragma once

#include <doctest/doctest.h>
#include <sys/wait.h>

#include <cstddef>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

namespace gpufeed::test {

// Runs the generator into `dir` with `args` after the directory; when it exits 77 (h5py or a
// plugin package is missing) prints "<skip_note>" and exits 77 (skipped). Call once per run.
inline bool make_codec_fixtures(const std::filesystem::path& dir, const std::string& args,
                                const char* skip_note) {
  const std::string cmd = std::string(GPUFEED_TEST_PYTHON) + " " + GPUFEED_CODEC_FIXTURES + " " +
                          dir.string() + args;
  const int rc = std::system(cmd.c_str());
  if (WIFEXITED(rc) && WEXITSTATUS(rc) == 77) {
    std::cerr << skip_note << "\n";
    std::exit(77);
  }
  REQUIRE_MESSAGE(rc == 0, "make_codec_fixtures.py failed: " << cmd);
  return true;
}

// The bytes h5py read back from <dir>/<name>.h5, which the generator wrote to <name>.raw.
inline std::vector<std::byte> fixture_bytes(const std::filesystem::path& dir,
                                            const std::string& name) {
  std::ifstream f(dir / (name + ".raw"), std::ios::binary);
  REQUIRE_MESSAGE(f, "no fixture " << (dir / (name + ".raw")).string());
  std::vector<char> all((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const auto* p = reinterpret_cast<const std::byte*>(all.data());
  return {p, p + all.size()};
}

// The fixtures' names, in the generator's manifest order (12 codec settings x 3 layouts).
inline std::vector<std::string> fixture_names(const std::filesystem::path& dir) {
  std::ifstream m(dir / "manifest.txt");
  std::vector<std::string> names;
  for (std::string n; m >> n;) names.push_back(n);
  REQUIRE(names.size() == 36);
  return names;
}

// A fixture's row bytes, from its layout ("span", "odd" or "rows": make_codec_fixtures.py).
inline std::size_t fixture_row_bytes(const std::string& name) {
  if (name.ends_with("_span")) return 2048 * 4;
  return name.ends_with("_odd") ? 37 * 4 : 64 * 4;
}

// The bytes h5py read from <dir>/<name>.h5, cut into rows of `row` bytes.
inline std::vector<std::vector<std::byte>> fixture_rows(const std::filesystem::path& dir,
                                                        const std::string& name,
                                                        std::size_t row) {
  const std::vector<std::byte> all = fixture_bytes(dir, name);
  REQUIRE(all.size() % row == 0);
  std::vector<std::vector<std::byte>> rows;
  for (std::size_t at = 0; at < all.size(); at += row)
    rows.emplace_back(all.begin() + static_cast<std::ptrdiff_t>(at),
                      all.begin() + static_cast<std::ptrdiff_t>(at + row));
  return rows;
}
inline std::vector<std::vector<std::byte>> fixture_rows(const std::filesystem::path& dir,
                                                        const std::string& name) {
  return fixture_rows(dir, name, fixture_row_bytes(name));
}

}  // namespace gpufeed::test
