// Fault injection (under fault_shim.c) against LMDB shards. gpufeed reads LMDB records through
// LMDB's memory map, which the shim does not see; what it reaches is opening (LMDB reads the
// meta pages with pread). Any fault there is a typed gpufeed error naming the shard — short
// reads and EINTR included: liblmdb 0.9 does not retry them in mdb_env_read_header (a short
// read is reported as MDB_INVALID, "not an LMDB environment"; EINTR as errno 4). Records read with faults armed are exact under every
// error policy. (Truncating an LMDB shard while it is mapped is tested by the LMDB suite.)
#include <doctest/doctest.h>

#include <map>
#include <string>

#include "fault_control.hpp"
#include "fault_loader.hpp"
#include "gpufeed/lmdb_source.hpp"
#include "gpufeed/loader.hpp"
#include "lmdb_test_util.hpp"
#include "test_util.hpp"

using namespace gpufeed;

namespace {
std::string value_of(std::uint64_t i) { return std::string(40 + i % 50, static_cast<char>('a' + i % 26)) + std::to_string(i); }

std::filesystem::path write_shard(const std::filesystem::path& dir) {
  gpufeed::test::kv_list kv;
  for (std::uint64_t i = 0; i < 300; ++i) kv.emplace_back(gpufeed::test::key8(i), value_of(i));
  const auto p = dir / "db";
  gpufeed::test::write_lmdb(p, kv);
  return p;
}
}  // namespace

TEST_CASE("LMDB: faults while opening are typed errors naming the shard") {
  gpufeed::test::fault_control fc;
  gpufeed::test::temp_dir dir("fault_lmdb");
  const auto p = write_shard(dir.path());
  for (const char* mode : {"eio", "eof", "short", "eintr"}) {
    for (long after : {0L, 1L, 2L}) {
      CAPTURE(mode);
      CAPTURE(after);
      fc.arm(p.string(), mode, after, std::string(mode) == "eintr" ? 2 : 0);
      try {
        lmdb_source src(p);
        REQUIRE(src.size() == 300);
        auto r = src.make_reader();
        std::vector<std::byte> buf(src.max_record_size());
        for (std::uint64_t i = 0; i < src.size(); ++i) {
          r.read(i, std::span<std::byte>(buf.data(), src.record_size(i)));
          CHECK(gpufeed::test::as_string({buf.data(), src.record_size(i)}) == value_of(i));
        }
      } catch (const gpufeed::error& e) {
        CHECK(e.file().find(p.string()) == 0);
      }
      fc.disarm();
    }
  }
}

TEST_CASE("LMDB: records read with faults armed are exact under every error policy") {
  gpufeed::test::fault_control fc;
  gpufeed::test::temp_dir dir("fault_lmdb_policy");
  const auto p = write_shard(dir.path());
  for (error_policy policy : {error_policy::throw_error, error_policy::skip, error_policy::substitute}) {
    CAPTURE(static_cast<int>(policy));
    fc.watch(p.string());
    lmdb_source src(p);
    fc.arm(p.string(), "eio", 0, 3);
    const loader_config c = gpufeed::test::fault_loader_config(policy);
    loader<lmdb_source> l(src, c);
    std::map<std::uint64_t, int> seen;
    while (auto b = l.next()) {
      CHECK(b->skipped().empty());
      for (std::size_t j = 0; j < b->size(); ++j) {
        const auto i = b->indices()[j];
        CHECK(gpufeed::test::as_string(b->record(j)) == value_of(i));
        ++seen[i];
      }
    }
    fc.disarm();
    CHECK(seen.size() == 300);
    for (const auto& [i, n] : seen) CHECK(n == 1);
  }
}
