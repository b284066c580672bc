// hdf5_source over http:// URLs through the node-local cache (hdf5_options::remote_cache;
// include/gpufeed/detail/remote/local_cache*.hpp), nginx serving shards the test writes, its
// access log counting the requests: epoch 2 through the loader makes no request when the budget
// holds the shards, every record once with the local shard's bytes in block_shuffled order; a
// later source over the same directory asks only to open the objects; a budget smaller than the
// shards stays within it on disk, the shard that fits is read again with no request, and it stays
// through block_shuffled epochs over both shards, each making fewer requests than without the
// cache (nothing evicted for the data being read); cached
// blocks damaged on disk are fetched again, never delivered; an object replaced on the server is
// read anew, never from its old blocks; two processes reading the same URLs through one
// directory both get the bytes.
// Skips when nginx is not installed.
#include <doctest/doctest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "../hdf5/h5_writer.hpp"
#include "env_guard.hpp"
#include "gpufeed/detail/remote/local_cache_source.hpp"
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
using gpufeed::test::record_of;
using gpufeed::test::watchdog;
namespace fs = std::filesystem;
namespace remote = gpufeed::detail::remote;
using namespace std::chrono_literals;

namespace {

constexpr std::size_t row = 700;
constexpr std::size_t block = 64 * 1024;

// A contiguous shard of `rows` rows, or a chunked + shuffled + deflated one (chunks of 50 rows).
void write_fixed(const fs::path& p, std::uint64_t rows, bool chunked, unsigned seed) {
  gpufeed::test::write_rows(p, rows, row, chunked ? gpufeed::test::rows_layout{50, true, 4}
                                                  : gpufeed::test::rows_layout{},
                            seed);
}

struct served {
  temp_dir root{"cachewww"};
  temp_dir cache_dir{"cache"};
  nginx_server nginx;
  gpufeed::test::env_guard env;
  served()
      : nginx((write_fixed(root / "c.h5", 1500, false, 1), write_fixed(root / "z.h5", 1000, true, 2),
               root.path())) {
    env.unset("GPUFEED_REMOTE_CACHE_DIR");  // the options alone say which cache
    env.unset("GPUFEED_REMOTE_CACHE_BYTES");
  }
  [[nodiscard]] std::vector<std::string> urls() const {
    return {nginx.url("c.h5"), nginx.url("z.h5")};
  }
  [[nodiscard]] std::vector<fs::path> paths() const { return {root / "c.h5", root / "z.h5"}; }
  [[nodiscard]] hdf5_options cached(std::uint64_t max_bytes) const {
    hdf5_options o;
    o.remote_cache.directory = cache_dir.path();
    o.remote_cache.max_bytes = max_bytes;
    o.remote_cache.block_bytes = block;
    return o;
  }
  [[nodiscard]] std::size_t requests() const { return nginx.logged_connections().size(); }
  // The process's cache at cache_dir (what the sources of `o` read through while they live).
  [[nodiscard]] static remote::cache_stats stats(const hdf5_options& o) {
    const auto& c = o.remote_cache;
    return remote::shared_local_cache(
               *remote::resolve_cache_config(c.directory, c.max_bytes, c.block_bytes))
        ->stats();
  }
  [[nodiscard]] std::vector<fs::path> block_files() const {
    std::vector<fs::path> out;
    for (const auto& e : fs::recursive_directory_iterator(cache_dir / "v1" / "objects"))
      if (e.path().extension() == ".blk") out.push_back(e.path());
    return out;
  }
  [[nodiscard]] std::uint64_t bytes_on_disk() const {
    std::uint64_t n = 0;
    for (const auto& p : block_files()) n += fs::file_size(p);
    return n;
  }
};

// Records of `remote` that differ from `local`'s, each read on its own.
std::size_t differing(const hdf5_source& remote, const hdf5_source& local) {
  if (remote.size() != local.size()) return ~std::size_t{0};
  std::size_t differ = 0;
  for (std::uint64_t i = 0; i < local.size(); ++i)
    if (record_of(remote, i) != record_of(local, i)) ++differ;
  return differ;
}

}  // namespace

TEST_CASE("remote cache: epoch 2 reads the shards from the cache, no request made") {
  served s;
  if (!s.nginx.running()) GPUFEED_SKIP_TEST(s.nginx.why_not());
  watchdog dog(120s, "hdf5 shards through nginx and the remote cache");
  const hdf5_options o = s.cached(std::uint64_t{64} << 20);
  const hdf5_source local(s.paths());
  {
    const hdf5_source remote(s.urls(), o);
    check_epoch(remote, local, sample_order::block_shuffled);
    const std::size_t after_first = s.requests();
    MESSAGE("requests in epoch 1 (with the open): " << after_first);
    check_epoch(remote, local, sample_order::block_shuffled);
    check_epoch(remote, local, sample_order::shuffled);
    CHECK(differing(remote, local) == 0);
    CHECK(s.requests() == after_first);
    const remote::cache_stats st = served::stats(o);
    CHECK(st.misses > 0);
    CHECK(st.hits > 0);
    CHECK(st.bytes_local > 0);
    CHECK(st.corrupt == 0);
    CHECK(st.evictions == 0);
  }
  // A cache directory without a budget: a config_error naming the option, before any request.
  hdf5_options no_budget = o;
  no_budget.remote_cache.max_bytes = 0;
  CHECK_THROWS_AS(hdf5_source(s.urls(), no_budget), config_error);
  // A later run over the same directory: only the opening requests (one probe an object).
  const std::size_t before = s.requests();
  const hdf5_source again(s.urls(), o);
  check_epoch(again, local, sample_order::block_shuffled);
  MESSAGE("requests of a later source: " << s.requests() - before);
  CHECK(s.requests() - before <= 4);
}

TEST_CASE("remote cache: a budget smaller than the shards holds on disk and saves requests") {
  served s;
  if (!s.nginx.running()) GPUFEED_SKIP_TEST(s.nginx.why_not());
  watchdog dog(120s, "hdf5 shards through nginx and a small remote cache");
  const hdf5_source local(s.paths());
  // Room for the contiguous shard's blocks (1500 rows of 700 bytes: 17 blocks), not for both.
  const std::uint64_t budget = 20 * (block + remote::cache_header_bytes);
  const hdf5_options o = s.cached(budget);
  const hdf5_source remote(s.urls(), o);
  auto read_first_shard = [&](const hdf5_source& src) {
    const std::size_t before = s.requests();
    std::size_t bad = 0;
    for (std::uint64_t i = 0; i < 1500; ++i) bad += record_of(src, i) != record_of(local, i);
    CHECK(bad == 0);
    return s.requests() - before;
  };
  std::size_t uncached_again = 0;
  {
    const hdf5_source plain(s.urls());
    (void)read_first_shard(plain);
    uncached_again = read_first_shard(plain);
  }
  const std::size_t first = read_first_shard(remote);
  const std::size_t again = read_first_shard(remote);
  MESSAGE("the first shard's records read again: " << uncached_again << " requests uncached, "
                                                    << again << " through the cache (" << first
                                                    << " the first time)");
  CHECK(uncached_again > 0);
  CHECK(again == 0);  // the part that fits is read from the cache
  CHECK(differing(remote, local) == 0);
  CHECK(s.bytes_on_disk() <= budget);
  // block_shuffled epochs over more data than the budget: the blocks that fit stay (none evicted
  // for another of the data being read), so each epoch after the first makes fewer requests than
  // an epoch without the cache, and the first shard is still read with none.
  std::size_t uncached_epoch = 0, cached_epochs[3] = {};
  {
    const hdf5_source plain(s.urls());
    const std::size_t before = s.requests();
    check_epoch(plain, local, sample_order::block_shuffled, 32, 7);
    uncached_epoch = s.requests() - before;
  }
  for (std::uint64_t e = 0; e < 3; ++e) {
    const std::size_t before = s.requests();
    check_epoch(remote, local, sample_order::block_shuffled, 32, e);
    cached_epochs[e] = s.requests() - before;
    CHECK(s.bytes_on_disk() <= budget);
  }
  MESSAGE("block_shuffled epochs: " << uncached_epoch << " requests uncached; through the cache "
                                    << cached_epochs[0] << ", " << cached_epochs[1] << ", "
                                    << cached_epochs[2]);
  CHECK(served::stats(o).evictions == 0);
  CHECK(served::stats(o).declined > 0);
  CHECK(cached_epochs[1] < uncached_epoch);
  CHECK(cached_epochs[2] < uncached_epoch);
  CHECK(read_first_shard(remote) == 0);
}

TEST_CASE("remote cache: damaged blocks are fetched again, an object replaced is read anew") {
  served s;
  if (!s.nginx.running()) GPUFEED_SKIP_TEST(s.nginx.why_not());
  watchdog dog(120s, "damaged and replaced cached blocks");
  const hdf5_options o = s.cached(std::uint64_t{64} << 20);
  {
    const hdf5_source local(s.paths());
    const hdf5_source remote(s.urls(), o);
    CHECK(differing(remote, local) == 0);
    const auto files = s.block_files();
    REQUIRE(files.size() > 10);
    for (const auto& p : files) {  // one byte of each block's data
      std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
      f.seekp(static_cast<std::streamoff>(remote::cache_header_bytes + 5));
      f.put('\x7f');
      f.seekp(static_cast<std::streamoff>(remote::cache_header_bytes + 6));
      f.put('\x80');
    }
    const std::size_t before = s.requests();
    CHECK(differing(remote, local) == 0);
    const remote::cache_stats st = served::stats(o);
    MESSAGE("damaged blocks found: " << st.corrupt << " of " << files.size());
    CHECK(st.corrupt > 0);
    CHECK(s.requests() - before == st.corrupt);  // each fetched again, once
  }
  // c.h5 replaced on the server: same size, other bytes, a later modification time (a new ETag).
  write_fixed(s.root / "c.h5", 1500, false, 9);
  fs::last_write_time(s.root / "c.h5", fs::last_write_time(s.root / "c.h5") + 100s);
  const hdf5_source local(s.paths());
  const hdf5_source remote(s.urls(), o);
  CHECK(differing(remote, local) == 0);
  CHECK(served::stats(o).invalidated > 0);
}

TEST_CASE("remote cache: two processes read the same URLs through one directory at once") {
  served s;
  if (!s.nginx.running()) GPUFEED_SKIP_TEST(s.nginx.why_not());
  for (const std::uint64_t budget : {std::uint64_t{64} << 20, 8 * (block + remote::cache_header_bytes)}) {
    INFO("budget " << budget);
    const hdf5_options o = s.cached(budget);
    std::vector<pid_t> kids;
    for (int k = 0; k < 2; ++k) {
      const pid_t pid = ::fork();
      REQUIRE(pid >= 0);
      if (pid == 0) {  // reads every record twice; its exit status says how it went
        int status = 0;
        try {
          const hdf5_source local(s.paths());
          const hdf5_source remote(s.urls(), o);
          for (int pass = 0; pass < 2; ++pass)
            if (differing(remote, local) != 0) status = 1;
        } catch (...) {
          status = 2;
        }
        ::_exit(status);
      }
      kids.push_back(pid);
    }
    for (const pid_t pid : kids) {
      int status = -1;
      const auto end = std::chrono::steady_clock::now() + 60s;
      while (::waitpid(pid, &status, WNOHANG) == 0 && std::chrono::steady_clock::now() < end)
        std::this_thread::sleep_for(10ms);
      if (!WIFEXITED(status)) {  // past its bound: stopped, reaped, reported
        ::kill(pid, SIGKILL);
        (void)::waitpid(pid, nullptr, 0);
      }
      CHECK(WIFEXITED(status));
      CHECK(WEXITSTATUS(status) == 0);
    }
    CHECK(s.bytes_on_disk() <= budget);
    CHECK(fs::is_empty(s.cache_dir / "v1" / "tmp"));
  }
}
