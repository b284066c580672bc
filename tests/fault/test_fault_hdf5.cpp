// Fault injection (run under fault_shim.c via LD_PRELOAD, which fails pread and preadv: the
// sources read with pread, hdf5_options::reads; a memory map's faults are test_hdf5_truncate's)
// against HDF5 shards on the three read paths: raw pread (contiguous), pread + gzip decode
// (chunked deflate) and the H5Dread fallback
// (a 24-bit-precision integer type HDF5 must convert). Short reads and EINTR are byte-exact with
// no error; EIO and early EOF are io_error naming the file and record, under every error policy
// of the loader, and every record is delivered (byte-exact) or reported, exactly once.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "fault_control.hpp"
#include "fault_loader.hpp"
#include "gpufeed/hdf5_source.hpp"
#include "gpufeed/loader.hpp"
#include "h5_writer.hpp"
#include "test_util.hpp"

using namespace gpufeed;
using gpufeed::test::dataset_spec;
using gpufeed::test::h5_file;

namespace {
// The shim fails system calls: read with pread even where a memory map is the default.
gpufeed::hdf5_options pread_options() {
  gpufeed::hdf5_options o;
  o.reads = gpufeed::hdf5_options::read_method::pread;
  return o;
}

// 64-byte records; 256 KiB, more than libhdf5's 64 KiB sieve buffer (the fallback reads that much)
constexpr std::size_t rows = 4000, cols = 16;

enum class path_kind { raw, gzip, fallback };
const char* name_of(path_kind k) {
  return k == path_kind::raw ? "raw" : k == path_kind::gzip ? "gzip" : "fallback";
}

std::vector<std::int32_t> values() {
  auto v = gpufeed::test::pattern<std::int32_t>(rows * cols, 5);
  for (auto& x : v) x %= (1 << 23);  // fits the fallback shard's 24-bit precision
  return v;
}

std::filesystem::path write_shard(const std::filesystem::path& dir, path_kind k) {
  const auto path = dir / (std::string(name_of(k)) + ".h5");
  h5_file f(path);
  dataset_spec s;
  s.file_type = H5T_STD_I32LE;
  s.mem_type = H5T_NATIVE_INT32;
  s.dims = {rows, cols};
  gpufeed::test::h5_id t24(H5Tcopy(H5T_STD_I32LE), H5Tclose, "H5Tcopy");
  if (k == path_kind::gzip) {
    s.chunk = {10, cols};
    s.deflate = 4;
  } else if (k == path_kind::fallback) {
    gpufeed::test::h5_check(H5Tset_precision(t24, 24), "H5Tset_precision");
    s.file_type = t24;
  }
  f.add(s, values());
  return path;
}

bool exact(std::uint64_t i, std::span<const std::byte> got) {
  static const auto v = values();
  return got.size() == cols * 4 && std::memcmp(got.data(), v.data() + i * cols, cols * 4) == 0;
}

hdf5_read_path expected_path(path_kind k) {
  return k == path_kind::raw    ? hdf5_read_path::pread_raw
         : k == path_kind::gzip ? hdf5_read_path::pread_decode
                                : hdf5_read_path::h5dread_fallback;
}

const path_kind all_kinds[] = {path_kind::raw, path_kind::gzip, path_kind::fallback};
}  // namespace

TEST_CASE("short reads and EINTR on every other read are byte-exact, with no error") {
  gpufeed::test::fault_control fc;
  gpufeed::test::temp_dir dir("fault_ok");
  for (path_kind k : all_kinds) {
    for (const char* mode : {"short", "eintr"}) {
      CAPTURE(name_of(k));
      CAPTURE(mode);
      const auto p = write_shard(dir.path(), k).string();
      fc.arm(p, mode, 0, 2);  // from the first read on, opening included
      hdf5_source src(p, pread_options());
      CHECK(src.shards()[0].read_path == expected_path(k));
      auto r = src.make_reader();
      std::vector<std::byte> buf(src.max_record_size());
      std::size_t bad = 0;
      for (std::uint64_t i = 0; i < src.size(); ++i) {
        r.read(i, buf);
        bad += !exact(i, buf);
      }
      CHECK(bad == 0);
      CHECK(fc.injected() > 0);
      fc.disarm();
    }
  }
}

TEST_CASE("EIO and early EOF while opening are io_error naming the file") {
  gpufeed::test::fault_control fc;
  gpufeed::test::temp_dir dir("fault_open");
  for (path_kind k : all_kinds) {
    const auto p = write_shard(dir.path(), k).string();
    for (const char* mode : {"eio", "eof"}) {
      for (long after : {0L, 1L, 2L, 3L, 5L, 8L}) {
        CAPTURE(name_of(k));
        CAPTURE(mode);
        CAPTURE(after);
        fc.arm(p, mode, after);
        try {
          hdf5_source src(p, pread_options());
          CHECK(fc.injected() == 0);  // opened: then the fault came after all of open's reads
        } catch (const io_error& e) {
          CHECK(e.file() == p);
        } catch (const gpufeed::error& e) {
          const std::string m = std::string("not an io_error: ") + e.what();
          FAIL(m);
        }
        fc.disarm();
      }
    }
  }
}

TEST_CASE("one EIO on the fallback path: that record fails, the records after it are exact") {
  // libhdf5 1.10.8 keeps the bytes of a failed read in its sieve buffer; reading on through the
  // same dataset handle delivered the previous records' bytes.
  gpufeed::test::fault_control fc;
  gpufeed::test::temp_dir dir("fault_stale");
  for (path_kind k : all_kinds) {
    for (const char* mode : {"eio", "eof"}) {
      CAPTURE(name_of(k));
      CAPTURE(mode);
      const auto p = write_shard(dir.path(), k).string();
      fc.watch(p);
      hdf5_source src(p, pread_options());
      fc.arm(p, mode, 1);
      auto r = src.make_reader();
      std::vector<std::byte> buf(src.max_record_size());
      std::size_t bad = 0, failed = 0;
      for (std::uint64_t i = 0; i < src.size(); ++i) {
        try {
          r.read(i, buf);
          bad += !exact(i, buf);
        } catch (const io_error& e) {
          ++failed;
          CHECK(e.file() == p);
          CHECK(e.record() == i);
          r.read(i, buf);  // the fault was transient: a retry reads the right bytes
          bad += !exact(i, buf);
        }
      }
      CHECK(failed == 1);
      CHECK(bad == 0);
      fc.disarm();
    }
  }
}


TEST_CASE("EIO and early EOF every 7th read, under every error policy: exact set, exact bytes") {
  gpufeed::test::fault_control fc;
  gpufeed::test::temp_dir dir("fault_policy");
  for (path_kind k : all_kinds) {
    for (const char* mode : {"eio", "eof"}) {
      for (error_policy policy :
           {error_policy::throw_error, error_policy::skip, error_policy::substitute}) {
        CAPTURE(name_of(k));
        CAPTURE(mode);
        CAPTURE(static_cast<int>(policy));
        const auto p = write_shard(dir.path(), k).string();
        fc.watch(p);
        hdf5_source src(p, pread_options());
        fc.arm(p, mode, 2, 7);
        loader<hdf5_source> l(src, gpufeed::test::fault_loader_config(policy));
        std::map<std::uint64_t, int> delivered, reported;
        std::size_t bad = 0, thrown = 0;
        for (;;) {
          try {
            auto b = l.next();
            if (!b) break;
            for (std::size_t j = 0; j < b->size(); ++j) {
              bad += !exact(b->indices()[j], b->record(j));
              if (policy != error_policy::substitute) ++delivered[b->indices()[j]];
            }
            for (const auto& s : b->skipped()) {
              ++reported[s.index];
              CHECK(s.what.find(p) != std::string::npos);
              CHECK(s.what.find("record " + std::to_string(s.index)) != std::string::npos);
            }
          } catch (const io_error& e) {
            ++thrown;
            CHECK(policy == error_policy::throw_error);
            CHECK(e.file() == p);
            REQUIRE(e.record().has_value());
            ++reported[*e.record()];
          }
        }
        CHECK(fc.injected() > 0);
        fc.disarm();
        CHECK(bad == 0);
        CHECK(!reported.empty());
        for (const auto& [i, n] : reported) CHECK(n == 1);
        if (policy == error_policy::skip) {  // each record delivered or skipped, exactly once
          for (std::uint64_t i = 0; i < rows; ++i)
            CHECK(delivered[i] + reported[i] == 1);
        }
        if (policy == error_policy::throw_error) {  // failed batches hold the rest
          CHECK(thrown == reported.size());
          for (const auto& [i, n] : delivered) CHECK(reported.count(i) == 0);
          for (const auto& [i, n] : delivered) CHECK(n == 1);
        }
      }
    }
  }
}
