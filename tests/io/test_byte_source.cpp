// The byte-source seam (gpufeed/detail/io/): pread's implementation (io::posix_file) reads the
// bytes written at every offset; a read past the end, or of a file truncated after it was opened,
// is an io_error naming the file, the record and pread — never zeros; a failed read carries its
// errno. read_ranges reads adjacent ranges as one scatter read and others one by one, byte-equal
// either way. The checks are the seam's, not the reader's: an in-memory test double that only
// says what each attempt did gets short reads continued, EINTR retried and truncation reported
// exactly as pread does, and is accepted where gpufeed takes a reader (a shard's fingerprint and
// identity check, an owned shard reader).
#include <doctest/doctest.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "gpufeed/detail/io/byte_source.hpp"
#include "gpufeed/detail/io/posix_file.hpp"
#include "gpufeed/detail/pack_manifest.hpp"
#include "gpufeed/error.hpp"
#include "byte_files.hpp"
#include "memory_bytes.hpp"
#include "test_util.hpp"

using gpufeed::io_error;
using gpufeed::detail::io::byte_range;
using gpufeed::detail::io::byte_source;
using gpufeed::detail::io::owned_source;
using gpufeed::detail::io::posix_file;
using gpufeed::detail::io::read_outcome;
using gpufeed::test::io_error_of;
using gpufeed::test::memory_bytes;
using gpufeed::test::pattern;
using gpufeed::test::slice;
using gpufeed::test::write_bytes;
namespace fs = std::filesystem;

namespace {

const std::string truncation = "the file was truncated after it was opened?";

constexpr std::size_t file_size = 3 * 4096 + 77;

}  // namespace

TEST_CASE("posix_file: the bytes written, at every offset and length asked") {
  gpufeed::test::temp_dir dir("io_read");
  const auto bytes = pattern(file_size);
  const auto path = write_bytes(dir / "f.bin", bytes);
  const posix_file f(path);
  CHECK(f.size() == file_size);
  CHECK(f.name() == path.string());
  for (const std::size_t at : {std::size_t{0}, std::size_t{1}, std::size_t{4095}, std::size_t{4096},
                               std::size_t{5000}, file_size - 300, file_size - 1}) {
    for (const std::size_t n : {std::size_t{1}, std::size_t{7}, std::size_t{256}, std::size_t{4097}}) {
      if (at + n > file_size) continue;
      CAPTURE(at);
      CAPTURE(n);
      std::vector<std::byte> got(n, std::byte{0});
      f.read_exact(got.data(), n, at, 3);
      CHECK(got == slice(bytes, at, n));
    }
  }
  std::vector<std::byte> all(file_size);
  f.read_exact(all.data(), all.size(), 0);
  CHECK(all == bytes);
  f.read_exact(all.data(), 0, file_size + 100);  // nothing asked: nothing read, no error
}

TEST_CASE("posix_file: a read past the end is io_error naming the file, the record and pread") {
  gpufeed::test::temp_dir dir("io_past");
  const auto path = write_bytes(dir / "f.bin", pattern(file_size));
  const posix_file f(path);
  std::vector<std::byte> got(64);
  const io_error e = io_error_of([&] { f.read_exact(got.data(), 64, file_size - 10, 41); });
  CHECK(e.message() == "unexpected end of file at byte " + std::to_string(file_size) + " (" +
                           truncation + ")");
  CHECK(e.file() == path.string());
  CHECK(e.record() == 41);
  CHECK(e.api() == "pread");
  CHECK_FALSE(e.status());
  // Without a record, none is named.
  const io_error n = io_error_of([&] { f.read_exact(got.data(), 1, file_size); });
  CHECK_FALSE(n.record());
  CHECK(n.message() == "unexpected end of file at byte " + std::to_string(file_size) + " (" +
                           truncation + ")");
}

TEST_CASE("posix_file: truncated after it was opened, reads past the cut fail (never zeros)") {
  gpufeed::test::temp_dir dir("io_trunc");
  const auto bytes = pattern(file_size);
  const auto path = write_bytes(dir / "f.bin", bytes);
  const posix_file f(path);
  fs::resize_file(path, 4096);
  CHECK(f.size() == file_size);  // the size when it was opened
  std::vector<std::byte> got(1000, std::byte{0x5a});
  // Before the cut: still the bytes written.
  f.read_exact(got.data(), 1000, 3000 - 1000, 0);
  CHECK(got == slice(bytes, 2000, 1000));
  // Across it and past it: the truncation error, naming where the file ended.
  for (const std::uint64_t at : {std::uint64_t{3500}, std::uint64_t{8000}}) {
    CAPTURE(at);
    const io_error e = io_error_of([&] { f.read_exact(got.data(), 1000, at, 9); });
    CHECK(e.message() == "unexpected end of file at byte " +
                             std::to_string(at < 4096 ? 4096 : at) + " (" + truncation + ")");
    CHECK(e.file() == path.string());
    CHECK(e.record() == 9);
    CHECK(e.api() == "pread");
  }
  // A scatter read names preadv.
  std::vector<std::byte> a(600), b(600);
  std::vector<iovec> parts{{a.data(), a.size()}, {b.data(), b.size()}};
  const io_error s = io_error_of([&] { f.read_scatter(parts, 3500, 12); });
  CHECK(s.api() == "preadv");
  CHECK(s.record() == 12);
  CHECK(s.message() == "unexpected end of file at byte 4096 (" + truncation + ")");
  // The outcome without an exception: where and why it stopped.
  const read_outcome o = f.try_read(got.data(), 1000, 3500);
  CHECK(o.why == read_outcome::stop::ended);
  CHECK(o.at == 4096);
}

TEST_CASE("posix_file: a failed read is io_error with the errno (closed descriptor: EBADF)") {
  gpufeed::test::temp_dir dir("io_fail");
  const auto bytes = pattern(file_size);
  const auto path = write_bytes(dir / "f.bin", bytes);
  posix_file f(path);
  f.close();
  CHECK_FALSE(f.is_open());
  std::vector<std::byte> got(16);
  const io_error e = io_error_of([&] { f.read_exact(got.data(), 16, 100, 5); });
  CHECK(e.message() == "read failed");
  CHECK(e.file() == path.string());
  CHECK(e.record() == 5);
  CHECK(e.api() == "pread");
  CHECK(e.status() == EBADF);
  f.reopen();  // the same file, same size: read again
  f.read_exact(got.data(), 16, 100, 5);
  CHECK(got == slice(bytes, 100, 16));
  // Grown since it was opened: reopen refuses it (its index would not describe it).
  f.close();
  write_bytes(path, pattern(file_size + 1));
  CHECK_THROWS_AS(f.reopen(), gpufeed::format_error);
}

TEST_CASE("posix_file: open errors name the file and what failed") {
  gpufeed::test::temp_dir dir("io_open");
  const io_error e = io_error_of([&] { posix_file f(dir / "missing.bin"); });
  CHECK(e.message() == "cannot open file");
  CHECK(e.api() == "open");
  CHECK(e.status() == ENOENT);
  const io_error m =
      io_error_of([&] { posix_file f(dir / "missing.bin", "cannot open the LMDB data file"); });
  CHECK(m.message() == "cannot open the LMDB data file");
  const io_error d = io_error_of([&] { posix_file f(dir.path()); });
  CHECK(d.message() == "not a regular file");
}

TEST_CASE("read_ranges: adjacent and scattered ranges, byte-equal") {
  gpufeed::test::temp_dir dir("io_ranges");
  const auto bytes = pattern(file_size);
  const auto path = write_bytes(dir / "f.bin", bytes);
  const posix_file f(path);
  memory_bytes m(bytes, "mem");
  // (offset, size): a run of three adjacent ranges, an empty one, a gap, a lone range, two
  // adjacent ones at the end of the file, and one before the others (out of order).
  const std::vector<std::pair<std::size_t, std::size_t>> spans{
      {100, 50}, {150, 1}, {151, 4000}, {4151, 0}, {6000, 33}, {file_size - 20, 10},
      {file_size - 10, 10}, {10, 20}};
  for (const byte_source* src : {static_cast<const byte_source*>(&f), static_cast<const byte_source*>(&m)}) {
    CAPTURE(src->name());
    std::vector<std::vector<std::byte>> out;
    std::vector<byte_range> ranges;
    for (const auto& [at, n] : spans) out.emplace_back(n, std::byte{0});
    for (std::size_t k = 0; k < spans.size(); ++k)
      ranges.push_back({out[k].data(), spans[k].second, spans[k].first});
    src->read_ranges(ranges, 77);
    for (std::size_t k = 0; k < spans.size(); ++k)
      CHECK(out[k] == slice(bytes, spans[k].first, spans[k].second));
  }
  // The double counts the attempts: the two adjacent groups are one scatter read each, the
  // lone ranges one read each.
  CHECK(m.scatter_reads() == 2);
  CHECK(m.reads() == 2);

  // Ranges adjacent in the file AND in memory are one buffer: one plain read.
  std::vector<std::byte> one(300);
  const std::vector<byte_range> joined{{one.data(), 100, 500}, {one.data() + 100, 200, 600}};
  const long before = m.reads();
  m.read_ranges(joined);
  CHECK(one == slice(bytes, 500, 300));
  CHECK(m.reads() == before + 1);
  CHECK(m.scatter_reads() == 2);

  // Past the end: the truncation error, naming the call's record.
  std::vector<std::byte> a(10), b(10);
  const std::vector<byte_range> past{{a.data(), 10, file_size - 15}, {b.data(), 10, file_size - 5}};
  const io_error e = io_error_of([&] { f.read_ranges(past, 8); });
  CHECK(e.api() == "preadv");
  CHECK(e.record() == 8);
  CHECK(e.file() == path.string());
  CHECK(e.message() == "unexpected end of file at byte " + std::to_string(file_size) + " (" +
                           truncation + ")");
}

TEST_CASE("read_ranges: more adjacent ranges than one scatter read takes") {
  const auto bytes = pattern(3000);
  memory_bytes m(bytes, "mem");
  std::vector<std::byte> out(3000);
  std::vector<byte_range> ranges;
  // Every other byte's buffer is out of place in memory, so no two parts merge.
  for (std::size_t i = 0; i < 3000; ++i) ranges.push_back({&out[(i * 7) % 3000], 1, i});
  m.read_ranges(ranges);
  for (std::size_t i = 0; i < 3000; ++i) CHECK(out[(i * 7) % 3000] == bytes[i]);
  CHECK(m.scatter_reads() == 3);  // 1024 + 1024 + 952 parts
}

TEST_CASE("the seam's checks, whatever the reader: short reads, EINTR, truncation, failure") {
  const auto bytes = pattern(file_size);
  memory_bytes m(bytes, "mem/shard.h5");
  std::vector<std::byte> got(5000);
  SUBCASE("short reads are continued, interruptions retried") {
    m.at_most(7);
    m.interrupt(3);
    m.read_exact(got.data(), got.size(), 1234, 1);
    CHECK(got == slice(bytes, 1234, 5000));
    CHECK(m.reads() == 3 + (5000 + 6) / 7);
    // A scatter read too, through the seam's default (one buffer an attempt).
    m.vectored(false);
    m.interrupt(2);
    std::vector<std::byte> a(100), b(3);
    std::vector<iovec> parts{{a.data(), 100}, {b.data(), 3}};
    m.read_scatter(parts, 40, 1);
    CHECK(a == slice(bytes, 40, 100));
    CHECK(b == slice(bytes, 140, 3));
  }
  SUBCASE("a source cut short: the truncation error, with its api") {
    m.cut(2000);
    const io_error e = io_error_of([&] { m.read_exact(got.data(), 500, 1800, 17); });
    CHECK(e.message() == "unexpected end of file at byte 2000 (" + truncation + ")");
    CHECK(e.file() == "mem/shard.h5");
    CHECK(e.record() == 17);
    CHECK(e.api() == "memory");
  }
  SUBCASE("a failing source: read failed, with the errno") {
    m.fail_with(EIO);
    const io_error e = io_error_of([&] { m.read_exact(got.data(), 10, 0, 2); });
    CHECK(e.message() == "read failed");
    CHECK(e.status() == EIO);
    CHECK(e.api() == "memory");
    CHECK(e.record() == 2);
  }
  SUBCASE("what the read served leads the message (HDF5's file driver)") {
    m.cut(100);
    const read_outcome o = m.try_read(got.data(), 50, 80);
    REQUIRE(o.why == read_outcome::stop::ended);
    const io_error e = io_error_of([&] {
      gpufeed::detail::io::throw_read_error(o, m.name(), 4, "cannot open dataset (H5Dopen2)");
    });
    CHECK(e.message() == "cannot open dataset (H5Dopen2): unexpected end of file at byte 100 (" +
                             truncation + ")");
    m.fail_with(EIO);
    const read_outcome f = m.try_read(got.data(), 50, 80);
    const io_error g = io_error_of(
        [&] { gpufeed::detail::io::throw_read_error(f, m.name(), 4, "H5Dread failed"); });
    CHECK(g.message() == "H5Dread failed: read failed at byte 80");
    CHECK(g.status() == EIO);
  }
}

TEST_CASE("a test double is accepted where gpufeed takes a reader") {
  gpufeed::test::temp_dir dir("io_double");
  // Over 128 KiB: the fingerprint reads the first and the last 64 KiB.
  const auto bytes = pattern(200000);
  const auto path = write_bytes(dir / "s.h5", bytes);
  const posix_file f(path);
  memory_bytes m(bytes, path.string());

  // A shard's fingerprint, and the identity check against pack's manifest.
  CHECK(gpufeed::detail::shard_fingerprint(m) == gpufeed::detail::shard_fingerprint(f));
  CHECK(m.reads() == 2);
  gpufeed::detail::pack_manifest manifest;
  manifest.path = dir / "manifest.json";
  gpufeed::detail::manifest_entry e;
  e.file_bytes = bytes.size();
  e.fingerprint = gpufeed::detail::shard_fingerprint(f);
  gpufeed::detail::check_identity(manifest, "s.h5", e, m);
  auto other = bytes;
  other[100] ^= std::byte{1};
  memory_bytes changed(other, path.string());
  CHECK_THROWS_AS(gpufeed::detail::check_identity(manifest, "s.h5", e, changed),
                  gpufeed::format_error);
  // Its own words for what the seam finds.
  m.cut(150000);
  const io_error t = io_error_of([&] { (void)gpufeed::detail::shard_fingerprint(m); });
  CHECK(t.message() == "the shard ended early while its identity was checked (truncated?)");
  CHECK(t.file() == path.string());
  CHECK(t.api().empty());
  m.fail_with(EIO);
  const io_error r = io_error_of([&] { (void)gpufeed::detail::shard_fingerprint(m); });
  CHECK(r.message() == "cannot read the shard to check its identity");
  CHECK(r.api() == "memory");
  CHECK(r.status() == EIO);

  // Held as a shard's reader: the calls reach it.
  auto held = std::make_unique<memory_bytes>(bytes, "held");
  const memory_bytes* raw = held.get();
  owned_source s(std::move(held));
  REQUIRE(s);
  CHECK(s.as<memory_bytes>() == raw);
  CHECK(s.as<posix_file>() == nullptr);
  CHECK(s.size() == bytes.size());
  CHECK(s.name() == "held");
  std::vector<std::byte> got(10);
  s.read_exact(got.data(), 10, 1000);
  CHECK(got == slice(bytes, 1000, 10));
  s.will_need(0, 100);
  s.close();
  s.reopen();
  CHECK(raw->reads() == 1);
  CHECK(raw->advised() == 1);
  CHECK(raw->closes() == 1);
  CHECK(raw->reopens() == 1);
}
