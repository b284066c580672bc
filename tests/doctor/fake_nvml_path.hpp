// Where the fake NVML library (fake_nvml.cpp) is: where the build put it (GPUFEED_FAKE_NVML), or,
// for test programs copied elsewhere (scripts/gpu-bundle.sh), next to the test program or in
// ../lib beside it. "" when it is nowhere: the tests that need it then fail, saying so.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>
#include <system_error>

namespace gpufeed::test {

inline std::string fake_nvml_path() {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path built = GPUFEED_FAKE_NVML;
  if (fs::exists(built, ec)) return built.string();
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return {};
  for (const fs::path& p : {exe.parent_path() / built.filename(), exe.parent_path() / ".." / "lib" / built.filename()})
    if (fs::exists(p, ec)) return fs::absolute(p, ec).string();
  return {};
}

}  // namespace gpufeed::test

// In a test case: binds `name` to the fake NVML's path, or fails the test case saying where it
// was looked for (the build always makes it; a bundle that lacks it is incomplete).
#define GPUFEED_FAKE_NVML_OR_FAIL(name)                                                          \
  const std::string name = ::gpufeed::test::fake_nvml_path();                                  \
  if (name.empty())                                                                            \
  FAIL("fake NVML library not found (" GPUFEED_FAKE_NVML                                       \
       ", nor next to this test program or in ../lib beside it): copy it there")
