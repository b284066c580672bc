// list_directory, directory_labels and read_list_file: order, labels, symlinks, list syntax.
#include <doctest/doctest.h>
#include <sys/stat.h>

#include <cerrno>
#include <filesystem>
#include <string>
#include <vector>

#include "gpufeed/pack/pack.hpp"
#include "pack_test_util.hpp"
#include "test_util.hpp"

using namespace gpufeed;
namespace fs = std::filesystem;
using gpufeed::test::write_text;

namespace {
std::vector<std::string> names_of(const std::vector<pack_input>& v) {
  std::vector<std::string> n;
  for (const auto& i : v) n.push_back(i.name);
  return n;
}
}  // namespace

TEST_CASE("list_directory: recursive, sorted byte-wise by relative path") {
  gpufeed::test::temp_dir dir("list");
  const fs::path root = dir / "in";
  for (const char* n : {"b/2", "b/10", "B/x", "a/z/deep", "a/y", "a.txt", "\xc3\xa9/u", "_/k"})
    write_text(root / n, n);
  const auto v = list_directory(root, false);
  // Byte order: 'B' (0x42) < '_' (0x5f) < 'a' < 'b' < 0xc3; "a.txt" < "a/..." ('.' < '/').
  CHECK(names_of(v) == std::vector<std::string>{"B/x", "_/k", "a.txt", "a/y", "a/z/deep", "b/10",
                                                "b/2", "\xc3\xa9/u"});
  for (const auto& i : v) {
    CHECK(i.path == root / i.name);
    CHECK_FALSE(i.label.has_value());
  }
}

TEST_CASE("list_directory: labels from first-level subdirectories, ImageFolder numbering") {
  gpufeed::test::temp_dir dir("labels");
  const fs::path root = dir / "in";
  write_text(root / "dog/1.jpg", "d1");
  write_text(root / "cat/sub/2.jpg", "c2");
  write_text(root / "cat/1.jpg", "c1");
  fs::create_directories(root / "empty");  // counted: labels do not depend on contents
  write_text(root / "zebra/9", "z");
  CHECK(directory_labels(root) == std::vector<std::string>{"cat", "dog", "empty", "zebra"});
  const auto v = list_directory(root, true);
  REQUIRE(v.size() == 4);
  CHECK(names_of(v) ==
        std::vector<std::string>{"cat/1.jpg", "cat/sub/2.jpg", "dog/1.jpg", "zebra/9"});
  CHECK(*v[0].label == 0);
  CHECK(*v[1].label == 0);
  CHECK(*v[2].label == 1);
  CHECK(*v[3].label == 3);

  write_text(root / "stray.txt", "s");  // a file with no class
  try {
    (void)list_directory(root, true);
    FAIL("expected config_error");
  } catch (const config_error& e) {
    CHECK(e.file() == (root / "stray.txt").string());
  }
  CHECK(list_directory(root, false).size() == 5);
}

TEST_CASE("list_directory: symlinks inside are followed, leaving ones refused, dirs skipped") {
  gpufeed::test::temp_dir dir("links");
  const fs::path root = dir / "in";
  write_text(root / "a/real", "real");
  write_text(dir / "outside/secret", "secret");
  fs::create_directory_symlink(root / "a", root / "loop");  // a directory link: never followed
  fs::create_directory_symlink(root, root / "a/up");        // a cycle
  fs::create_symlink(root / "a/real", root / "b_link");
  REQUIRE(::mkfifo((root / "fifo").c_str(), 0600) == 0);  // skipped: would block
  fs::create_symlink("a/real", root / "c_rel");           // relative to root: inside
  auto v = list_directory(root, false);
  CHECK(names_of(v) == std::vector<std::string>{"a/real", "b_link", "c_rel"});
  CHECK(v[1].path == root / "b_link");

  fs::create_symlink(dir / "outside/secret", root / "d_escape");
  try {
    (void)list_directory(root, false);
    FAIL("expected format_error");
  } catch (const format_error& e) {
    CHECK(e.file() == (root / "d_escape").string());
    CHECK(std::string(e.what()).find("outside the input directory") != std::string::npos);
  }
  fs::remove(root / "d_escape");
  fs::create_symlink("../in/../outside/secret", root / "e_escape_rel");
  CHECK_THROWS_AS((void)list_directory(root, false), format_error);
  fs::remove(root / "e_escape_rel");

  fs::create_symlink(root / "nothing", root / "f_dangling");
  try {
    (void)list_directory(root, false);
    FAIL("expected io_error");
  } catch (const io_error& e) {
    CHECK(e.file() == (root / "f_dangling").string());
  }
}

TEST_CASE("list_directory: a symbolic link loop is ELOOP, not a link that points to nothing") {
  gpufeed::test::temp_dir dir("loop");
  const fs::path root = dir / "in";
  write_text(root / "a/real", "real");
  fs::create_symlink(root / "y", root / "x");
  fs::create_symlink(root / "x", root / "y");
  try {
    (void)list_directory(root, false);
    FAIL("expected io_error");
  } catch (const io_error& e) {
    CHECK(e.file() == (root / "x").string());
    CHECK(e.status() == std::optional<long long>(ELOOP));
    CHECK(std::string(e.what()).find("points to nothing") == std::string::npos);
  }
}

TEST_CASE("list_directory: missing or non-directory root") {
  gpufeed::test::temp_dir dir("root");
  CHECK_THROWS_AS((void)list_directory(dir / "missing", false), io_error);
  write_text(dir / "file", "x");
  CHECK_THROWS_AS((void)list_directory(dir / "file", false), config_error);
  fs::create_directories(dir / "empty");
  CHECK(list_directory(dir / "empty", false).empty());
}

TEST_CASE("read_list_file: paths relative to the list, absolute paths, labels, CRLF") {
  gpufeed::test::temp_dir dir("lst");
  const fs::path list = dir / "sub/list.txt";
  write_text(list, "x/a.bin\t3\r\n\n" + (dir / "abs.bin").string() + "\t-2\n../up.bin\t0\n");
  const auto v = read_list_file(list);
  REQUIRE(v.size() == 3);
  CHECK(v[0].name == "x/a.bin");
  CHECK(v[0].path == dir / "sub/x/a.bin");
  CHECK(*v[0].label == 3);
  CHECK(v[1].path == dir / "abs.bin");
  CHECK(v[1].name == (dir / "abs.bin").string());
  CHECK(*v[1].label == -2);
  CHECK(v[2].name == "../up.bin");
  CHECK(v[2].path == dir / "sub/../up.bin");

  write_text(list, "a\nb\n");
  const auto u = read_list_file(list);
  REQUIRE(u.size() == 2);
  CHECK_FALSE(u[0].label.has_value());
}

TEST_CASE("read_list_file: bad lines are format_errors naming the list and line") {
  gpufeed::test::temp_dir dir("badlst");
  const fs::path list = dir / "list.txt";
  auto expect = [&](const std::string& text, const std::string& line) {
    CAPTURE(text);
    write_text(list, text);
    try {
      (void)read_list_file(list);
      FAIL("expected format_error");
    } catch (const format_error& e) {
      CHECK(e.file() == list.string());
      CHECK(std::string(e.what()).find("line " + line) != std::string::npos);
    }
  };
  expect(std::string("ok\nbad\0name\n", 13), "2");
  expect("a\t\n", "1");
  expect("a\tcat\n", "1");
  expect("a\t1\t2\n", "1");
  expect("a\t99999999999999999999\n", "1");
  expect("a\n\tnolabel-path\n", "2");
  CHECK_THROWS_AS((void)read_list_file(dir / "missing.txt"), io_error);
}
