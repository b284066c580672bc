// The doctor's host checks, on prepared trees and temp data: device files with container hints,
// storage read rates, page-cache residency, bad paths.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gpufeed/doctor/doctor.hpp"
#include "test_util.hpp"

using namespace gpufeed;
namespace fs = std::filesystem;
namespace dd = gpufeed::detail::doctor;

namespace {
bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

void write_file(const fs::path& p, std::size_t bytes, unsigned char seed = 1) {
  fs::create_directories(p.parent_path());
  std::ofstream out(p, std::ios::binary);
  std::string block(bytes, '\0');
  for (std::size_t i = 0; i < bytes; ++i) block[i] = static_cast<char>((i * 131 + seed) & 0xFF);
  out.write(block.data(), static_cast<std::streamsize>(block.size()));
}

std::string fact(const doctor_check& c, const std::string& key) {
  for (const auto& [k, v] : c.facts)
    if (k == key) return v;
  return "<no fact " + key + ">";
}
double number(const doctor_check& c, const std::string& key) {
  for (const auto& [k, v] : c.numbers)
    if (k == key) return v;
  return -1.0;
}

struct fake_tree {
  test::temp_dir dir{"doctor-dev"};
  device_files_options opts;
  fake_tree() {
    opts.dev_dir = dir / "dev";
    opts.root = dir / "root";
    opts.proc_dir = dir / "proc";
    fs::create_directories(opts.dev_dir);
    fs::create_directories(opts.root);
    fs::create_directories(opts.proc_dir);
  }
  void touch(const fs::path& p) const {
    fs::create_directories(p.parent_path());
    std::ofstream(p) << "x";
  }
  void text(const fs::path& p, const std::string& s) const {
    fs::create_directories(p.parent_path());
    std::ofstream(p) << s;
  }
  doctor_check run() const {
    doctor_report r;
    add_device_files_check(r, opts);
    REQUIRE(r.checks.size() == 1);
    CHECK(r.checks[0].id == "device_files");
    return r.checks[0];
  }
};
}  // namespace

TEST_CASE("device files: all present and usable") {
  fake_tree t;
  for (const char* f : {"nvidiactl", "nvidia-uvm", "nvidia0", "nvidia1", "nvidia-uvm-tools", "nvidia-caps"})
    t.touch(t.opts.dev_dir / f);
  t.text(t.opts.proc_dir / "driver/nvidia/version",
         "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.04  Thu Oct 30 2025\nGCC version: 12\n");
  const auto c = t.run();
  CHECK(c.status == check_status::pass);
  CHECK(has(c.summary, "2 GPU device files"));
  CHECK(fact(c, "GPU device files") == (t.opts.dev_dir / "nvidia0").string() + ", " + (t.opts.dev_dir / "nvidia1").string());
  CHECK(fact(c, "NVIDIA kernel module") == "580.159.04");
  CHECK(fact(c, "container") == "none detected");
  CHECK(number(c, "gpu_device_files") == 2.0);
  CHECK(c.hint.empty());
}

TEST_CASE("device files: none, inside containers, say the container lacks GPU access") {
  SUBCASE("docker") {
    fake_tree t;
    t.touch(t.opts.root / ".dockerenv");
    const auto c = t.run();
    CHECK(c.status == check_status::warn);
    CHECK(has(c.summary, "Docker"));
    CHECK(has(c.summary, "without GPU access"));
    CHECK(has(c.hint, "--gpus all"));
  }
  SUBCASE("podman") {
    fake_tree t;
    t.touch(t.opts.root / "run/.containerenv");
    const auto c = t.run();
    CHECK(has(c.summary, "Podman"));
    CHECK(has(c.hint, "nvidia.com/gpu=all"));
  }
  SUBCASE("kubernetes, seen in the cgroup") {
    fake_tree t;
    t.text(t.opts.proc_dir / "1/cgroup", "12:pids:/kubepods/besteffort/pod1234/abcd\n");
    const auto c = t.run();
    CHECK(c.status == check_status::warn);
    CHECK(has(fact(c, "container"), "kubepods"));
    CHECK(has(c.hint, "Kubernetes"));
  }
}

TEST_CASE("device files: none outside a container") {
  SUBCASE("driver loaded: the files were not created") {
    fake_tree t;
    t.text(t.opts.proc_dir / "driver/nvidia/version",
           "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  Release Build\n");
    const auto c = t.run();
    CHECK(c.status == check_status::warn);
    CHECK(has(c.summary, "580.95.05 is loaded"));
    CHECK(has(c.hint, "nvidia-modprobe"));
  }
  SUBCASE("no driver: no GPU here") {
    fake_tree t;
    const auto c = t.run();
    CHECK(c.status == check_status::warn);
    CHECK(has(c.summary, "no NVIDIA GPU"));
    CHECK(fact(c, "NVIDIA kernel module") == "not loaded");
  }
}

TEST_CASE("device files: a missing nvidia-uvm or nvidiactl fails with the fix") {
  SUBCASE("uvm") {
    fake_tree t;
    t.touch(t.opts.dev_dir / "nvidiactl");
    t.touch(t.opts.dev_dir / "nvidia0");
    const auto c = t.run();
    CHECK(c.status == check_status::fail);
    CHECK(has(c.summary, "nvidia-uvm is missing"));
    CHECK(has(c.hint, "nvidia-modprobe -u"));
  }
  SUBCASE("ctl") {
    fake_tree t;
    t.touch(t.opts.dev_dir / "nvidia-uvm");
    t.touch(t.opts.dev_dir / "nvidia0");
    const auto c = t.run();
    CHECK(c.status == check_status::fail);
    CHECK(has(c.summary, "nvidiactl is missing"));
  }
  SUBCASE("no GPU file") {
    fake_tree t;
    t.touch(t.opts.dev_dir / "nvidiactl");
    t.touch(t.opts.dev_dir / "nvidia-uvm");
    const auto c = t.run();
    CHECK(c.status == check_status::fail);
    CHECK(has(c.summary, "no "));
  }
}

TEST_CASE("device files: files this user cannot open fail, naming them") {
  if (::geteuid() == 0) {
    MESSAGE("running as root: permissions do not apply, not tested");
    return;
  }
  fake_tree t;
  for (const char* f : {"nvidiactl", "nvidia-uvm", "nvidia0"}) t.touch(t.opts.dev_dir / f);
  fs::permissions(t.opts.dev_dir / "nvidia0", fs::perms::none);
  const auto c = t.run();
  CHECK(c.status == check_status::fail);
  CHECK(has(c.summary, "cannot open"));
  CHECK(has(c.hint, "group"));
}

TEST_CASE("device files on this machine: a status, never an exception") {
  doctor_report r;
  CHECK_NOTHROW(add_device_files_check(r));
  REQUIRE(r.checks.size() == 1);
  CHECK_FALSE(r.checks[0].summary.empty());
  MESSAGE(r.to_text());
}

TEST_CASE("storage: a directory of files gives positive cold and warm rates") {
  test::temp_dir d("doctor-data");
  write_file(d / "a.bin", 3 << 20, 1);
  write_file(d / "sub/b.bin", (2 << 20) + 123, 2);  // not a multiple of the O_DIRECT alignment
  write_file(d / "sub/deeper/c.bin", 4096, 3);
  write_file(d / "empty.bin", 0);
  doctor_report r;
  add_storage_check(r, d.path());
  REQUIRE(r.checks.size() == 1);
  const auto& c = r.checks[0];
  CHECK(c.id == "storage");
  CHECK((c.status == check_status::pass || c.status == check_status::warn));
  CHECK(number(c, "files") == 3.0);
  CHECK(number(c, "total_bytes") == double((3 << 20) + (2 << 20) + 123 + 4096));
  CHECK(number(c, "bytes_read") == number(c, "total_bytes"));
  CHECK(number(c, "cold_gbps") > 0.0);
  CHECK(number(c, "warm_gbps") > 0.0);
  CHECK(has(c.summary, "3 files"));
  CHECK(fact(c, "path") == d.path().string());
  MESSAGE(r.to_text());
  const auto j = nlohmann::json::parse(r.to_json_string());
  CHECK(j.at("checks").at(0).at("numbers").at("cold_gbps").get<double>() > 0.0);
}

TEST_CASE("storage: one file, the byte cap, and the buffered fallback") {
  test::temp_dir d("doctor-file");
  write_file(d / "shard.h5", 5 << 20);
  SUBCASE("a single file as the path") {
    doctor_report r;
    add_storage_check(r, d / "shard.h5");
    CHECK(number(r.checks[0], "files") == 1.0);
    CHECK(has(r.checks[0].summary, "1 file:"));
  }
  SUBCASE("max_bytes caps every pass") {
    storage_check_options o;
    o.max_bytes = 1 << 20;
    o.block_bytes = 256 << 10;
    doctor_report r;
    add_storage_check(r, d.path(), o);
    CHECK(number(r.checks[0], "bytes_read") == double(1 << 20));
    CHECK(has(fact(r.checks[0], "read"), "(capped)"));
    CHECK(has(fact(r.checks[0], "from the page cache (warm)"), "1 MiB"));
  }
  SUBCASE("without O_DIRECT the first read is reported as such") {
    storage_check_options o;
    o.direct_io = false;
    doctor_report r;
    add_storage_check(r, d.path(), o);
    const auto& c = r.checks[0];
    CHECK(has(fact(c, "first read (buffered)"), "O_DIRECT was not asked for"));
    CHECK(has(c.summary, "no O_DIRECT"));
    CHECK(number(c, "cold_gbps") > 0.0);
  }
}

TEST_CASE("storage: data larger than memory warns that every epoch reads storage") {
  test::temp_dir d("doctor-big");
  write_file(d / "a.bin", 2 << 20);
  {  // Evict the file's pages so it is not "already cached" (works on disk file systems).
    const int fd = ::open((d / "a.bin").c_str(), O_RDONLY);
    REQUIRE(fd >= 0);
    ::fdatasync(fd);
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
  }
  std::vector<dd::data_file> files{{d / "a.bin", 2 << 20}};
  std::uint64_t scanned = 0;
  const auto resident = dd::resident_bytes(files, ~0ull, scanned);
  CHECK(scanned == 2u << 20);
  if (resident == scanned) {
    MESSAGE("this file system keeps the pages cached (tmpfs?): eviction not testable here");
    return;
  }
  const fs::path meminfo = d / "meminfo";
  std::ofstream(meminfo) << "MemTotal:  1024 kB\nMemFree: 100 kB\nMemAvailable:  512 kB\nCached: 10 kB\n";
  storage_check_options o;
  o.meminfo = meminfo;
  doctor_report r;
  add_storage_check(r, d.path(), o);
  const auto& c = r.checks[0];
  CHECK(c.status == check_status::warn);
  CHECK(has(c.summary, "larger than the memory"));
  CHECK(number(c, "mem_total_bytes") == 1024.0 * 1024);
  CHECK(number(c, "mem_available_bytes") == 512.0 * 1024);
  CHECK_FALSE(c.hint.empty());
}

TEST_CASE("storage: residency of freshly written data is seen by mincore") {
  test::temp_dir d("doctor-res");
  write_file(d / "a.bin", 1 << 20);
  std::vector<dd::data_file> files{{d / "a.bin", 1 << 20}};
  std::uint64_t scanned = 0;
  CHECK(dd::resident_bytes(files, ~0ull, scanned) == 1u << 20);
  CHECK(dd::resident_bytes(files, 4096, scanned) == 4096);
  CHECK(scanned == 4096);
}

TEST_CASE("storage: bad paths are failed checks, not exceptions") {
  test::temp_dir d("doctor-bad");
  SUBCASE("missing") {
    doctor_report r;
    CHECK_NOTHROW(add_storage_check(r, d / "no-such-dir"));
    CHECK(r.checks[0].status == check_status::fail);
    CHECK(has(r.checks[0].summary, "no-such-dir' does not exist"));
    CHECK(r.exit_code() == 1);
  }
  SUBCASE("empty directory") {
    fs::create_directories(d / "empty");
    write_file(d / "empty/zero.bin", 0);
    doctor_report r;
    add_storage_check(r, d / "empty");
    CHECK(r.checks[0].status == check_status::fail);
    CHECK(has(r.checks[0].summary, "holds no data"));
  }
  SUBCASE("no path: skipped with a hint") {
    doctor_report r;
    add_storage_check(r, "");
    CHECK(r.checks[0].status == check_status::skip);
    CHECK(has(r.checks[0].hint, "--data"));
  }
  SUBCASE("unreadable file") {
    if (::geteuid() == 0) return;  // root reads anything
    write_file(d / "locked/x.bin", 8192);
    fs::permissions(d / "locked/x.bin", fs::perms::none);
    doctor_report r;
    add_storage_check(r, d / "locked");
    CHECK(r.checks[0].status == check_status::fail);
    CHECK(has(r.checks[0].summary, "x.bin"));
    fs::permissions(d / "locked/x.bin", fs::perms::owner_all);
  }
}
