// The byte-source seam under the LMDB open checks (gpufeed/detail/io/byte_source.hpp): the meta
// pages are read through the reader they are given — a test double over data.mdb's bytes
// (support/memory_bytes.hpp) reads the same metas as pread, and the double cut short or failing
// is "shorter than two meta pages", as a short file is. A shard's identity (pack's fingerprint)
// is checked through a reader over LMDB's own descriptor (io::fd_reader).
#include <doctest/doctest.h>

#include <cerrno>
#include <cstdint>
#include <filesystem>
#include <string>

#include "gpufeed/detail/io/posix_file.hpp"
#include "gpufeed/detail/lmdb/meta_check.hpp"
#include "gpufeed/detail/pack_manifest.hpp"
#include "lmdb_test_util.hpp"
#include "memory_bytes.hpp"
#include "test_util.hpp"

namespace lm = gpufeed::detail::lmdb;
namespace io = gpufeed::detail::io;
using gpufeed::test::memory_bytes;

TEST_CASE("lmdb: meta pages read through the reader given, a double as pread") {
  gpufeed::test::temp_dir dir("lmdbseam");
  gpufeed::test::kv_list kv;
  for (std::uint64_t i = 0; i < 50; ++i) kv.emplace_back(gpufeed::test::key8(i), std::string(100, 'v'));
  const auto env = dir / "db";
  gpufeed::test::write_lmdb(env, kv);
  const auto data = env / "data.mdb";

  const io::posix_file f(data);
  memory_bytes m(memory_bytes::file_bytes(data), data.string());
  lm::meta_page a, b;
  REQUIRE(lm::read_meta(f, 0, a) == nullptr);
  REQUIRE(lm::read_meta(m, 0, b) == nullptr);
  CHECK(m.reads() == 1);
  CHECK(a.psize == b.psize);
  CHECK(a.txnid == b.txnid);
  CHECK(a.last_pg == b.last_pg);
  CHECK(a.main_root == b.main_root);
  REQUIRE(lm::read_meta(m, a.psize, b) == nullptr);

  m.cut(a.psize + 20);
  CHECK(std::string(lm::read_meta(m, a.psize, b)) == "the file is shorter than two meta pages");
  m.cut(a.psize * 2);
  m.fail_with(EIO);
  CHECK(std::string(lm::read_meta(m, 0, b)) == "the file is shorter than two meta pages");

  // The fingerprint through a reader over a descriptor it does not own, as the LMDB catalog
  // checks identity through LMDB's: the same as through the owning one.
  const io::fd_reader borrowed(f.fd(), f.size(), data.string());
  CHECK(gpufeed::detail::shard_fingerprint(borrowed) == gpufeed::detail::shard_fingerprint(f));
  CHECK(f.is_open());  // a borrowed reader closes nothing
}
