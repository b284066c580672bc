// The memory-mapped byte source (gpufeed/detail/io/mapped_file.hpp): reads return the bytes
// written at every offset, through read_exact, read_scatter and read_ranges, as pread does; a
// read past the end is the seam's truncation error naming file, record and "mmap". A file
// truncated while mapped never crashes the process and never passes for whole: a page wholly
// past the new end faults (SIGBUS, caught: the read's io_error), and the zeros the new last page
// reads past the end are told apart by size_now(), whose shrunk_error names file and record.
// close() and reopen() map the same file again, and refuse one replaced meanwhile.
#include <doctest/doctest.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "gpufeed/detail/io/map_fault_guard.hpp"
#include "gpufeed/detail/io/mapped_file.hpp"
#include "gpufeed/detail/io/posix_file.hpp"
#include "gpufeed/error.hpp"
#include "byte_files.hpp"
#include "test_util.hpp"

using gpufeed::format_error;
using gpufeed::io_error;
using gpufeed::detail::io::byte_range;
using gpufeed::detail::io::mapped_file;
using gpufeed::detail::io::posix_file;
using gpufeed::test::io_error_of;
using gpufeed::test::pattern;
using gpufeed::test::slice;
using gpufeed::test::write_bytes;
namespace fs = std::filesystem;

namespace {

const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));

}  // namespace

TEST_CASE("mapped_file: the bytes written, at every offset, whole, scattered and in ranges") {
  gpufeed::test::temp_dir dir("map_read");
  const std::size_t size = 5 * page + 77;
  const auto bytes = pattern(size);
  const auto path = write_bytes(dir / "f.bin", bytes);
  const mapped_file f{posix_file(path)};
  CHECK(f.size() == size);
  CHECK(f.name() == path.string());
  for (const std::size_t at : {std::size_t{0}, std::size_t{1}, page - 1, page, 3 * page + 5,
                               size - 300, size - 1}) {
    for (const std::size_t n : {std::size_t{1}, std::size_t{7}, std::size_t{256}, page + 1}) {
      if (at + n > size) continue;
      CAPTURE(at);
      CAPTURE(n);
      std::vector<std::byte> got(n, std::byte{0});
      f.read_exact(got.data(), n, at, 3);
      CHECK(got == slice(bytes, at, n));
    }
  }
  // Scatter: three buffers in order from one offset.
  std::vector<std::byte> a(100), b(page), c(333);
  std::vector<iovec> parts{{a.data(), a.size()}, {b.data(), b.size()}, {c.data(), c.size()}};
  f.read_scatter(parts, 1000, 1);
  CHECK(a == slice(bytes, 1000, 100));
  CHECK(b == slice(bytes, 1100, page));
  CHECK(c == slice(bytes, 1100 + page, 333));
  // Ranges, adjacent and not.
  std::vector<std::byte> r1(10), r2(20), r3(30);
  const std::vector<byte_range> ranges{{r1.data(), 10, 50}, {r2.data(), 20, 60},
                                       {r3.data(), 30, 4 * page}};
  f.read_ranges(ranges, 2);
  CHECK(r1 == slice(bytes, 50, 10));
  CHECK(r2 == slice(bytes, 60, 20));
  CHECK(r3 == slice(bytes, 4 * page, 30));
  CHECK(f.size_now() == size);
}

TEST_CASE("mapped_file: a read past the end is io_error naming the file, the record and mmap") {
  gpufeed::test::temp_dir dir("map_past");
  const std::size_t size = 2 * page + 10;
  const auto path = write_bytes(dir / "f.bin", pattern(size));
  const mapped_file f{posix_file(path)};
  std::vector<std::byte> got(64);
  const io_error e = io_error_of([&] { f.read_exact(got.data(), 64, size - 10, 41); });
  CHECK(e.message().find("unexpected end of file at byte " + std::to_string(size)) == 0);
  CHECK(e.file() == path.string());
  CHECK(e.record() == 41);
  CHECK(e.api() == "mmap");
  std::vector<iovec> parts{{got.data(), 32}, {got.data() + 32, 32}};
  const io_error s = io_error_of([&] { f.read_scatter(parts, size - 40, 42); });
  CHECK(s.record() == 42);
  CHECK(s.api() == "mmap");
}

TEST_CASE("mapped_file: an empty file maps to nothing and reads nothing") {
  gpufeed::test::temp_dir dir("map_empty");
  const auto path = write_bytes(dir / "f.bin", {});
  mapped_file f{posix_file(path)};
  CHECK(f.size() == 0);
  std::byte one{};
  f.read_exact(&one, 0, 0);
  CHECK(io_error_of([&] { f.read_exact(&one, 1, 0, 5); }).record() == 5);
  f.close();
  f.reopen();
  CHECK(f.size_now() == 0);
}

TEST_CASE("mapped_file: truncated while mapped, a page past the end is an error, never SIGBUS") {
  if (!gpufeed::detail::io::map_faults_guarded) {
    MESSAGE("skipped: the SIGBUS guard does not work under ThreadSanitizer");
    return;
  }
  gpufeed::test::temp_dir dir("map_trunc");
  const std::size_t size = 6 * page + 77;
  const auto bytes = pattern(size);
  const auto path = write_bytes(dir / "f.bin", bytes);
  const mapped_file f{posix_file(path)};
  std::vector<std::byte> warm(size);
  f.read_exact(warm.data(), size, 0);  // every page touched while whole
  CHECK(warm == bytes);
  const std::size_t cut = 2 * page + 100;
  fs::resize_file(path, cut);
  std::vector<std::byte> got(200, std::byte{0x5a});
  // Below the cut: the bytes written.
  f.read_exact(got.data(), 200, cut - 200, 0);
  CHECK(got == slice(bytes, cut - 200, 200));
  // Wholly past the new last page: SIGBUS caught, the seam's truncation error.
  for (const std::uint64_t at : {std::uint64_t{3 * page}, std::uint64_t{5 * page + 9}}) {
    CAPTURE(at);
    const io_error e = io_error_of([&] { f.read_exact(got.data(), 200, at, 9); });
    CHECK(e.message().find("unexpected end of file at byte " + std::to_string(at)) == 0);
    CHECK(e.file() == path.string());
    CHECK(e.record() == 9);
    CHECK(e.api() == "mmap");
    std::vector<iovec> parts{{got.data(), 100}, {got.data() + 100, 100}};
    CHECK(io_error_of([&] { f.read_scatter(parts, at, 10); }).record() == 10);
  }
  // In the new last page past the cut the map reads zeros without a fault: size_now() is what
  // tells, and shrunk_error names file, record and where the read reached.
  f.read_exact(got.data(), 200, cut + 50, 11);
  CHECK(got == std::vector<std::byte>(200, std::byte{0}));
  CHECK(f.size_now() == cut);
  const io_error s = f.shrunk_error(f.size_now(), cut + 250, 11);
  CHECK(s.file() == path.string());
  CHECK(s.record() == 11);
  CHECK(s.message().find("truncated while it was read through its memory map") !=
        std::string::npos);
  CHECK(s.message().find(std::to_string(cut) + " now") != std::string::npos);
}

TEST_CASE("mapped_file: close and reopen map the same file again; a replaced one is refused") {
  gpufeed::test::temp_dir dir("map_reopen");
  const std::size_t size = 3 * page + 1;
  const auto bytes = pattern(size);
  const auto path = write_bytes(dir / "f.bin", bytes);
  mapped_file f{posix_file(path)};
  f.close();
  f.reopen();
  std::vector<std::byte> all(size);
  f.read_exact(all.data(), size, 0);
  CHECK(all == bytes);
  f.close();
  write_bytes(dir / "g.bin", pattern(size, 7));
  fs::rename(dir / "g.bin", path);
  CHECK_THROWS_AS(f.reopen(), format_error);
}
