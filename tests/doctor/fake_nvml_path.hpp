// Where the fake NVML library (fake_nvml.cpp) is: where the build put it (GPUFEED_FAKE_NVML), or,
// for test programs copied elsewhere (scripts/gpu-bundle.sh), next to the test program or in
// ../lib beside it. "" when it is nowhere: the tests that need it then say so and return.
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

// In a test case: binds `name` to the fake NVML's path, or says why and leaves the test case.
#define GPUFEED_FAKE_NVML_OR_RETURN(name)                                                        \
  const std::string name = ::gpufeed::test::fake_nvml_path();                                  \
  if (name.empty()) {                                                                          \
    MESSAGE("fake NVML library not found (" GPUFEED_FAKE_NVML                                  \
            "); copy it next to this test program to run this test case");                     \
    return;                                                                                    \
  }
