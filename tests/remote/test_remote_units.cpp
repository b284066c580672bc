// Remote shards read in units: remote::unit_reads over a memory source (each unit fetched once
// with one read, let go once every byte of it was delivered, fetched again after; reads outside
// the units and in shuffled mode go through as they are; read-ahead fetches queued units), then
// hdf5_source over nginx on the loopback interface in block_shuffled order: every record once per
// epoch with the local shards' bytes, and at most 1.05x the dataset's bytes fetched per epoch, for
// contiguous uncompressed shards (one request per unit) and chunked deflated ones; sequential
// order reads units ahead, each fetched once. Shuffled order
// on a remote source gets the notice that names its requests per epoch; local sources report no
// remote block. Skips the nginx cases when nginx is not installed.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <memory>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "../hdf5/h5_writer.hpp"
#include "gpufeed/detail/loader/config.hpp"
#include "gpufeed/detail/remote/unit_reads.hpp"
#include "gpufeed/hdf5_source.hpp"
#include "gpufeed/loader.hpp"
#include "remote_epoch.hpp"
#include "test_servers.hpp"
#include "test_skip.hpp"
#include "test_util.hpp"
#include "watchdog.hpp"

using namespace gpufeed;
using gpufeed::test::dataset_spec;
using gpufeed::test::h5_file;
using gpufeed::test::nginx_server;
using gpufeed::test::temp_dir;
using gpufeed::test::check_epoch;
using gpufeed::test::watchdog;
namespace fs = std::filesystem;
namespace remote = gpufeed::detail::remote;
using namespace std::chrono_literals;

namespace {

// Bytes in memory, counting the reads made of it.
class counted_bytes final : public detail::io::byte_source {
 public:
  explicit counted_bytes(std::size_t n) : bytes_(n) {
    for (std::size_t k = 0; k < n; ++k) bytes_[k] = static_cast<std::byte>(k * 7 + k / 251);
  }
  [[nodiscard]] std::uint64_t size() const noexcept override { return bytes_.size(); }
  [[nodiscard]] const std::string& name() const noexcept override { return name_; }
  [[nodiscard]] std::byte at(std::size_t k) const noexcept { return bytes_[k]; }
  mutable std::atomic<int> reads{0};

 protected:
  detail::io::read_attempt read_some(void* dst, std::size_t n,
                                     std::uint64_t offset) const noexcept override {
    ++reads;
    if (offset >= bytes_.size()) return {0, 0};
    n = std::min<std::size_t>(n, bytes_.size() - offset);
    std::memcpy(dst, bytes_.data() + offset, n);
    return {n, 0};
  }
  [[nodiscard]] const char* api(bool) const noexcept override { return "memcpy"; }

 private:
  std::vector<std::byte> bytes_;
  std::string name_ = "memory";
};

struct over_memory {
  const counted_bytes* inner;
  std::unique_ptr<remote::unit_reads> units;
  explicit over_memory(std::size_t n) {
    auto b = std::make_unique<counted_bytes>(n);
    inner = b.get();
    units = std::make_unique<remote::unit_reads>(detail::io::owned_source(std::move(b)));
  }
  // Reads [offset, offset + n) through the units and checks the bytes.
  [[nodiscard]] bool read_ok(std::uint64_t offset, std::size_t n) const {
    std::vector<std::byte> got(n);
    units->read_exact(got.data(), n, offset);
    for (std::size_t k = 0; k < n; ++k)
      if (got[k] != inner->at(offset + k)) return false;
    return true;
  }
};

constexpr std::size_t row = 4096;  // bytes per record of the served shards

void write_shard(const fs::path& p, std::uint64_t rows, bool compressed, unsigned seed) {
  // Compressed: 128 KiB chunks.
  gpufeed::test::write_rows(p, rows, row, compressed ? gpufeed::test::rows_layout{32, false, 1}
                                                     : gpufeed::test::rows_layout{},
                            seed);
}

}  // namespace

TEST_CASE("unit_reads: a unit fetched once with one read, let go when spent, fetched again") {
  over_memory m(10'000);
  m.units->set_units({{1000, 5000, 4000}, {5000, 9000, 4000}});
  const int base = m.inner->reads.load();
  CHECK(m.read_ok(1000, 100));
  CHECK(m.inner->reads.load() == base + 1);  // the whole first unit, one read
  for (std::uint64_t at = 1100; at < 4900; at += 300)
    CHECK(m.read_ok(at, static_cast<std::size_t>(std::min<std::uint64_t>(300, 4900 - at))));
  CHECK(m.inner->reads.load() == base + 1);  // served from the unit
  CHECK(m.read_ok(4900, 200));  // across two units: the first's last bytes, the second fetched
  CHECK(m.inner->reads.load() == base + 2);
  remote_stats r = m.units->stats();
  CHECK(r.unit_fetches == 2);
  CHECK(r.unit_hits >= 13);  // the loop's reads and the first unit's part of the last
  CHECK(m.read_ok(1000, 10));  // the first unit was spent: fetched again
  CHECK(m.inner->reads.load() == base + 3);
  CHECK(m.read_ok(0, 1000));  // outside the units: read as asked
  CHECK(m.read_ok(9000, 1000));
  CHECK(m.inner->reads.load() == base + 5);
  m.units->mode(remote::unit_mode::each_read);  // shuffled order: each read alone
  CHECK(m.read_ok(6000, 10));
  CHECK(m.read_ok(6010, 10));
  CHECK(m.inner->reads.load() == base + 7);
  r = m.units->stats();
  CHECK(r.bytes_delivered == 100 + 3800 + 200 + 10 + 2000 + 20);
  CHECK(r.remote);
}

TEST_CASE("unit_reads: will_need fetches the units ahead; the reads then make no request") {
  over_memory m(1 << 20);
  std::vector<remote::unit_extent> units;
  for (std::uint64_t at = 0; at < (1u << 20); at += 1u << 16)
    units.push_back({at, at + (1u << 16), 1u << 16});
  m.units->set_units(units);
  m.units->will_need(0, 1u << 20);
  const auto until = std::chrono::steady_clock::now() + 20s;
  while (m.units->stats().unit_prefetches < 16 && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(1ms);
  CHECK(m.units->stats().unit_prefetches == 16);
  const int before = m.inner->reads.load();
  CHECK(m.read_ok(0, 1u << 20));
  CHECK(m.inner->reads.load() == before);
}

TEST_CASE("block_shuffled over URL shards: each unit fetched once per epoch, <= 1.05x the bytes") {
  temp_dir root{"h5units"};
  // Contiguous: 6144 + 5000 rows of 4 KiB (units of 1024 rows: 6 and 5 of them); chunked and
  // deflated: 3000 rows in 128 KiB chunks.
  write_shard(root / "c0.h5", 6144, false, 1);
  write_shard(root / "c1.h5", 5000, false, 2);
  write_shard(root / "z0.h5", 3000, true, 3);
  {  // bands of 12 MiB: six deflated 2 MiB chunks side by side
    h5_file f(root / "z1.h5");
    dataset_spec d;
    d.dims = {2048, 12288};
    d.chunk = {1024, 2048};
    d.deflate = 1;
    f.add(d, gpufeed::test::pattern<std::uint8_t>(2048 * 12288, 6));
  }
  nginx_server nginx(root.path());
  if (!nginx.running()) GPUFEED_SKIP_TEST(nginx.why_not());
  watchdog dog(240s, "remote units");
  SUBCASE("contiguous, uncompressed: one request per unit") {
    const hdf5_source src(std::vector<std::string>{nginx.url("c0.h5"), nginx.url("c1.h5")});
    const hdf5_source local(std::vector<fs::path>{root / "c0.h5", root / "c1.h5"});
    const double data = static_cast<double>(local.size() * row);
    for (std::uint64_t epoch = 0; epoch < 2; ++epoch) {
      const loader_stats s = check_epoch(src, local, sample_order::block_shuffled, 64, 11 + epoch);
      REQUIRE(s.remote);
      const remote_stats& r = *s.remote;
      MESSAGE("epoch " << epoch << ": " << to_text(r));
      CHECK(static_cast<double>(r.bytes_fetched) <= 1.05 * data);
      CHECK(r.bytes_delivered == local.size() * row);
      CHECK(r.unit_fetches == 11);
      CHECK(r.requests <= 11 + 2);
      CHECK(r.failures == 0);
      CHECK(s.order_units == 11);
    }
  }
  SUBCASE("sequential order: units read ahead as reads enter them in turn, each once") {
    const hdf5_source src(std::vector<std::string>{nginx.url("c0.h5"), nginx.url("c1.h5")});
    const hdf5_source local(std::vector<fs::path>{root / "c0.h5", root / "c1.h5"});
    const loader_stats s = check_epoch(src, local, sample_order::sequential, 64, 1);
    REQUIRE(s.remote);
    MESSAGE("sequential: " << to_text(*s.remote));
    CHECK(s.remote->unit_fetches == 11);
    CHECK(s.remote->unit_prefetches > 0);
    CHECK(static_cast<double>(s.remote->bytes_fetched) <=
          1.05 * static_cast<double>(local.size() * row));
  }
  SUBCASE("chunked, deflated: each chunk fetched once per epoch") {
    const hdf5_source src(nginx.url("z0.h5"));
    const hdf5_source local(root / "z0.h5");
    const double object = static_cast<double>(fs::file_size(root / "z0.h5"));
    const std::uint64_t units = (static_cast<std::uint64_t>(object) >> 22) + 1;
    for (std::uint64_t epoch = 0; epoch < 2; ++epoch) {
      src.drop_decoded_chunks();  // the whole shard fits the cache: each epoch from the server
      const loader_stats s = check_epoch(src, local, sample_order::block_shuffled, 64, 21 + epoch);
      REQUIRE(s.remote);
      MESSAGE("epoch " << epoch << ": " << to_text(*s.remote));
      CHECK(static_cast<double>(s.remote->bytes_fetched) <= 1.05 * object);
      CHECK(s.remote->unit_fetches <= units + 1);  // bands of chunks of about 4 MiB, once each
      CHECK(s.remote->requests == s.remote->unit_fetches);
      REQUIRE(s.decode);
      CHECK(s.decode->chunks_decoded == (3000 + 31) / 32);
    }
  }
  SUBCASE("a band larger than two units: fetched in several requests, each once per epoch") {
    const hdf5_source src(nginx.url("z1.h5"));
    const hdf5_source local(root / "z1.h5");
    loader_config c;
    c.epochs = 1;
    c.batch_size = 16;
    c.workers = 3;
    c.order = sample_order::block_shuffled;
    loader<hdf5_source> l(src, c);
    std::uint64_t records = 0, wrong = 0;
    std::vector<std::byte> want(12288);
    while (auto b = l.next()) {
      for (std::size_t k = 0; k < b->size(); ++k, ++records) {
        local.read(b->indices()[k], want);
        if (!std::equal(want.begin(), want.end(), b->record(k).begin())) ++wrong;
      }
    }
    CHECK(records == 2048);
    CHECK(wrong == 0);
    const loader_stats s = l.stats();
    REQUIRE(s.remote);
    MESSAGE("12 MiB bands: " << to_text(*s.remote));
    CHECK(s.remote->unit_fetches == 4);  // each band: 4 chunks (8 MiB), then 2
    CHECK(static_cast<double>(s.remote->bytes_fetched) <=
          1.05 * static_cast<double>(fs::file_size(root / "z1.h5")));
  }
  SUBCASE("shuffled order: a notice with the requests per epoch; each record read alone") {
    const hdf5_source src(nginx.url("c1.h5"));
    const hdf5_source local(root / "c1.h5");
    loader_config c;
    c.batch_size = 64;
    c.order = sample_order::shuffled;
    const auto setup = detail::loading::resolve_config<loader_options<>>(src, c, 4);
    MESSAGE(setup.order_notice);
    CHECK(setup.order_notice.find("~5000 requests per epoch") != std::string::npos);
    CHECK(setup.order_notice.find("sample_order::block_shuffled") != std::string::npos);
    CHECK(setup.order_notice.find("127.0.0.1") == std::string::npos);
    const loader_stats s = check_epoch(src, local, sample_order::shuffled, 64, 5);
    REQUIRE(s.remote);
    CHECK(s.remote->unit_fetches == 0);
    CHECK(s.remote->bytes_fetched == 5000 * row);
  }
}

TEST_CASE("a local source reports no remote block") {
  temp_dir root{"h5local"};
  write_shard(root / "c.h5", 300, false, 4);
  const hdf5_source local(root / "c.h5");
  CHECK_FALSE(local.remote_stats().remote);
  const loader_stats s = check_epoch(local, local, sample_order::block_shuffled, 64, 1);
  CHECK_FALSE(s.remote);
}

TEST_CASE("remote units through a store that answers 503 SlowDown now and then: retried, counted") {
  temp_dir root{"h5slow"};
  write_shard(root / "c.h5", 3000, false, 7);
  const gpufeed::test::fault_server store(
      root.path(), {"--fault", "slowdown", "--rate", "0.3", "--seed", "2", "--skip", "2"});
  if (!store.running()) GPUFEED_SKIP_TEST(store.why_not());
  watchdog dog(120s, "remote units, slowdowns");
  const hdf5_source src(store.url("c.h5"));
  const hdf5_source local(root / "c.h5");
  const loader_stats s = check_epoch(src, local, sample_order::block_shuffled, 64, 9);
  REQUIRE(s.remote);
  MESSAGE(to_text(*s.remote));
  CHECK(s.remote->failures == 0);
  CHECK(s.remote->unit_fetches == 3);
  CHECK(s.remote->requests == s.remote->unit_fetches + s.remote->retries);
  CHECK(s.remote->bytes_fetched == 3000 * row);
  // Seed 2 draws faults for requests 3 and 4 and none of the next seven (fewer than eleven
  // requests in all): the open's two requests let through, two 503s answered and tried again.
  CHECK(src.remote_stats().retries == 2);
  const std::string text = to_text(*s.remote);
  CHECK(text.find("127.0.0.1") == std::string::npos);
  CHECK(text.find("c.h5") == std::string::npos);
}
