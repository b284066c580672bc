// libFuzzer target: the HDF5 open path. The input is written to a file and opened with
// hdf5_source (automatic layout; then with a "labels" label dataset), and every record (up to
// 256) is read. A gpufeed::error is the expected answer to a damaged file; anything else — a
// crash, an abort, a sanitizer report, another exception type — is a finding.
//
// Seeds (tests/fuzz/seeds/hdf5_open): small valid shards of each storage gpufeed reads itself or
// falls back on (contiguous, chunked deflate+shuffle+fletcher32, blob with offsets and labels,
// the 1.10 format's chunk indexes, compact), written by make_hdf5_seeds.cpp.
//
// What remains libhdf5's (it faults before gpufeed can check anything): see the README's
// "Reliability" section.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <string>
#include <vector>

#include "gpufeed/hdf5_source.hpp"

namespace {
const std::string& scratch_path() {
  static const std::string p = [] {
    const char* dir = std::getenv("GPUFEED_TEST_TMPDIR");
    std::filesystem::path d = dir ? dir : std::filesystem::temp_directory_path().string();
    std::filesystem::create_directories(d);
    return (d / ("fuzz_hdf5_open." + std::to_string(::getpid()) + ".h5")).string();
  }();
  return p;
}

void open_and_read(const std::string& path, const gpufeed::hdf5_options& o) {
  try {
    gpufeed::hdf5_source src(path, o);
    std::vector<std::byte> buf(src.max_record_size());
    auto r = src.make_reader();
    const std::uint64_t n = src.size() < 256 ? src.size() : 256;
    for (std::uint64_t i = 0; i < n; ++i) {
      try {
        r.read(i, std::span<std::byte>(buf.data(), src.record_size(i)));
      } catch (const gpufeed::error&) {  // a bad record; the others must still be readable
      }
    }
  } catch (const gpufeed::error&) {
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz_hdf5_open: non-gpufeed exception: %s\n", e.what());
    std::abort();
  }
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string& path = scratch_path();
  if (std::FILE* f = std::fopen(path.c_str(), "wb")) {
    if (size) std::fwrite(data, 1, size, f);
    std::fclose(f);
  } else {
    std::abort();
  }
  open_and_read(path, {});
  gpufeed::hdf5_options labelled;
  labelled.label_dataset = "labels";
  open_and_read(path, labelled);
  return 0;
}
