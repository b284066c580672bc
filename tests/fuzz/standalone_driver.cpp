// A tiny stand-in for libFuzzer's main: runs LLVMFuzzerTestOneInput over the files named on the
// command line (directories: every regular file inside, in name order). Lets normal builds run
// every fuzz target over its seed corpus as a CTest test, with any compiler.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {
int run_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "cannot read %s\n", p.c_str());
    return 1;
  }
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
  return 0;
}
}  // namespace

int main(int argc, char** argv) {
  int inputs = 0, failures = 0;
  for (int a = 1; a < argc; ++a) {
    const std::filesystem::path arg = argv[a];
    std::vector<std::filesystem::path> files;
    if (std::filesystem::is_directory(arg)) {
      for (const auto& e : std::filesystem::directory_iterator(arg))
        if (e.is_regular_file()) files.push_back(e.path());
      std::sort(files.begin(), files.end());
    } else {
      files.push_back(arg);
    }
    for (const auto& f : files) {
      failures += run_file(f);
      ++inputs;
    }
  }
  std::printf("ran %d input(s)\n", inputs);
  return failures == 0 && inputs > 0 ? 0 : 1;
}
