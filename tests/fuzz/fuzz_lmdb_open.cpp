// Fuzz target: an LMDB data file, written to a temporary file and opened with lmdb_source
// (immutable, raw and Datum values), then every record read. Contract: any input gives records
// or a gpufeed::error (which must name the file); never a crash, an LMDB assertion, SIGBUS, or
// another exception type. Seeds (tests/fuzz/seeds/lmdb): single-file environments (4 KiB pages)
// with a leaf-only tree, overflow values, and a branch level, written by liblmdb with
// MDB_NOSUBDIR | MDB_NOLOCK. Mutable shards (immutable = false) are not fuzzed: their B-tree
// is not checked before LMDB walks it (LMDB's own assertions may stop the process there; see
// lmdb_source.hpp).
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gpufeed/lmdb_source.hpp"

namespace {
const std::string& scratch_file() {
  static const std::string p =
      (std::filesystem::temp_directory_path() / ("gpufeed-fuzz-lmdb-" + std::to_string(::getpid())))
          .string();
  return p;
}
struct remove_at_exit {
  ~remove_at_exit() { std::remove(scratch_file().c_str()); }
} cleanup;
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  {
    std::ofstream f(scratch_file(), std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    if (!f) std::abort();
  }
  for (const auto format : {gpufeed::lmdb_options::value_format::raw,
                            gpufeed::lmdb_options::value_format::datum}) {
    try {
      gpufeed::lmdb_options o;
      o.format = format;
      const gpufeed::lmdb_source s(scratch_file(), o);
      std::vector<std::byte> buf(s.max_record_size());
      auto r = s.make_reader();
      for (std::uint64_t i = 0; i < s.size(); ++i) {
        r.read(i, buf);
        if (s.has_labels()) (void)s.label(i);
      }
    } catch (const gpufeed::error& e) {
      if (e.file().empty()) {
        std::fprintf(stderr, "gpufeed error naming no file: %s\n", e.what());
        std::abort();
      }
    }
  }
  return 0;
}
