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

}  // namespace gpufeed::test
