// pack() under faults outside its control: a full file system, and kill -9 while it writes.
//
// Each pack runs in a forked child (the test binary is single-threaded when it forks), so a
// signal that kills the packer (SIGBUS from a store into a mapped file the disk cannot back) is a
// failed check here, not a crash of the test.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "gpufeed/pack/pack.hpp"
#include "pack_test_util.hpp"
#include "test_util.hpp"

using namespace gpufeed;
namespace fs = std::filesystem;
using gpufeed::test::random_bytes;
using gpufeed::test::read_file;
using gpufeed::test::write_file;

namespace {

std::vector<pack_input> make_inputs(const fs::path& dir, int files, std::size_t size) {
  std::vector<pack_input> in;
  for (int i = 0; i < files; ++i) {
    const fs::path p = dir / ("f" + std::to_string(i));
    write_file(p, random_bytes(size, static_cast<std::uint32_t>(i + 1)));
    in.push_back({p, p.filename().string(), std::nullopt});
  }
  return in;
}

// What a child's pack() ended with: "ok", "<error kind>|<file>|<what>", or how the child died.
struct child_result {
  std::string text;
  int signal = 0;
};

// Runs fn() in a child process and returns the line it returned; with kill_after_ms >= 0 the
// child is sent SIGKILL after that many milliseconds.
template <class Fn>
child_result in_child(Fn&& fn, int kill_after_ms = -1) {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::close(fds[0]);
    const std::string line = fn();
    [[maybe_unused]] const ssize_t n = ::write(fds[1], line.data(), line.size());
    ::_exit(0);
  }
  ::close(fds[1]);
  if (kill_after_ms >= 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(kill_after_ms));
    ::kill(pid, SIGKILL);
  }
  child_result r;
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    r.text.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
  return r;
}

std::string pack_and_describe(const std::vector<pack_input>& in, const fs::path& out,
                              const pack_options& o) {
  try {
    (void)pack(in, out, o);
    return "ok";
  } catch (const io_error& e) {
    return std::string("io_error|") + e.file() + "|" + e.what();
  } catch (const error& e) {
    return std::string("other gpufeed error|") + e.file() + "|" + e.what();
  } catch (const std::exception& e) {
    return std::string("std::exception||") + e.what();
  }
}

// Every entry under root whose name starts with '.' (pack's temporaries).
std::vector<std::string> hidden_entries(const fs::path& root) {
  std::vector<std::string> out;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec))
    if (it->path().filename().string().front() == '.') out.push_back(it->path().string());
  return out;
}

}  // namespace

TEST_CASE("pack onto a full file system: a typed error naming the shard, no SIGBUS, no temporary") {
  gpufeed::test::temp_dir dir("fullfs");
  const std::vector<pack_input> in = make_inputs(dir / "in", 16, 512u << 10);  // 8 MiB
  const fs::path mnt = dir / "mnt";
  fs::create_directories(mnt);
  // A 2 MiB tmpfs (needs CAP_SYS_ADMIN); elsewhere a 2 MiB file-size limit in the child.
  const bool mounted = ::mount("tmpfs", mnt.c_str(), "tmpfs", 0, "size=2m") == 0;
  if (!mounted)
    MESSAGE("cannot mount a tmpfs here (" << std::strerror(errno)
                                          << "): using a 2 MiB RLIMIT_FSIZE in the child instead");
  for (const auto format : {shard_format::hdf5, shard_format::lmdb}) {
    CAPTURE(to_string(format));
    const fs::path out = mnt / to_string(format);
    pack_options o;
    o.format = format;
    o.threads = 2;
    const child_result r = in_child([&] {
      if (!mounted) {
        ::signal(SIGXFSZ, SIG_IGN);  // writes past the limit fail with EFBIG instead
        const rlimit lim{2u << 20, 2u << 20};
        ::setrlimit(RLIMIT_FSIZE, &lim);
      }
      return pack_and_describe(in, out, o);
    });
    CHECK_MESSAGE(r.signal == 0, "the packer was killed by signal " << r.signal << " ("
                                                                     << strsignal(r.signal) << ")");
    CAPTURE(r.text);
    const std::string shard = (out / ("." + detail::pack::shard_name("shard", 0,
                                                                      format == shard_format::lmdb) +
                                      ".tmp"))
                                  .string();
    if (format == shard_format::lmdb) {
      CHECK(r.text.rfind("io_error|" + shard + "/data.mdb|", 0) == 0);
    } else {
      // HDF5 writes through the library: the error names the shard file.
      CHECK(r.text.find("|" + shard + "|") != std::string::npos);
    }
    CHECK(r.text.rfind("ok", 0) != 0);
    CHECK(hidden_entries(out).empty());
    if (fs::exists(out)) CHECK(fs::is_empty(out));
  }
  if (mounted) CHECK(::umount(mnt.c_str()) == 0);
}

TEST_CASE("kill -9 during pack, then a re-run with force: byte-identical shards, no temporary") {
  gpufeed::test::temp_dir dir("kill9");
  const std::vector<pack_input> in = make_inputs(dir / "in", 48, 512u << 10);  // 24 MiB
  for (const auto format : {shard_format::hdf5, shard_format::lmdb}) {
    CAPTURE(to_string(format));
    pack_options o;
    o.format = format;
    o.threads = 2;
    o.shard_bytes = 4u << 20;  // 6 shards
    const fs::path ref = dir / (std::string("ref-") + to_string(format));
    const pack_result want = pack(in, ref, o);
    REQUIRE(want.shards.size() == 6);
    int killed_mid_pack = 0;
    // The first kill comes from inside pack's first progress report (shard 0 half written); the
    // others after growing delays, wherever the packer is then.
    for (const int delay_ms : {-1, 10, 40, 90, 160}) {
      CAPTURE(delay_ms);
      const fs::path out = dir / (std::string("out-") + to_string(format) +
                                  std::to_string(delay_ms));
      const child_result r = in_child(
          [&] {
            pack_options c = o;
            if (delay_ms < 0) c.progress = [](const pack_progress&) { ::raise(SIGKILL); };
            const std::string what = pack_and_describe(in, out, c);
            for (;;) ::pause();  // a pack that ended before the kill waits for it
            return what;
          },
          delay_ms);
      CHECK(r.signal == SIGKILL);
      if (!hidden_entries(out).empty()) ++killed_mid_pack;
      pack_options again = o;
      again.force = true;
      const pack_result got = pack(in, out, again);
      REQUIRE(got.shards.size() == want.shards.size());
      for (std::size_t i = 0; i < got.shards.size(); ++i) {
        CAPTURE(got.shards[i]);
        const fs::path a = fs::is_directory(got.shards[i]) ? got.shards[i] / "data.mdb"
                                                           : got.shards[i];
        const fs::path b = fs::is_directory(want.shards[i]) ? want.shards[i] / "data.mdb"
                                                            : want.shards[i];
        CHECK(read_file(a) == read_file(b));
      }
      CHECK(read_file(got.manifest) == read_file(want.manifest));
      CHECK(hidden_entries(out).empty());
    }
    CHECK(killed_mid_pack >= 1);
  }
}
