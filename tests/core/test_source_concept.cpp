#include <doctest/doctest.h>

#include <cstring>
#include <vector>

#include "gpufeed/source.hpp"

using namespace gpufeed;

namespace {
// Minimal source: record i is i+1 bytes, each equal to i.
struct tiny_source {
  std::uint64_t size() const { return 10; }
  std::size_t record_size(std::uint64_t i) const { return i + 1; }
  void read(std::uint64_t i, std::span<std::byte> dst) const {
    std::memset(dst.data(), static_cast<int>(i), record_size(i));
  }
};
struct labeled_fixed_source {
  std::uint64_t size() const { return 4; }
  std::size_t record_size(std::uint64_t) const { return 8; }
  std::size_t fixed_record_size() const { return 8; }
  void read(std::uint64_t, std::span<std::byte>) const {}
  bool has_labels() const { return true; }
  std::int64_t label(std::uint64_t i) const { return static_cast<std::int64_t>(i) * 10; }
  struct reader {
    int* idles;
    void read(std::uint64_t, std::span<std::byte> dst) { dst[0] = std::byte{42}; }
    void idle() noexcept { ++*idles; }
  };
  int* idles = nullptr;
  reader make_reader() const { return reader{idles}; }
};
}  // namespace

static_assert(source<tiny_source>);
static_assert(!labeled_source<tiny_source>);
static_assert(!fixed_size_aware_source<tiny_source>);
static_assert(!reader_source<tiny_source>);
static_assert(labeled_source<labeled_fixed_source>);
static_assert(fixed_size_aware_source<labeled_fixed_source>);
static_assert(reader_source<labeled_fixed_source>);
static_assert(!source<int>);

TEST_CASE("plain sources get a forwarding reader") {
  tiny_source s;
  auto r = make_reader(s);
  std::vector<std::byte> buf(4);
  r.read(3, buf);
  CHECK(buf[3] == std::byte{3});
  reader_idle(r);  // no-op, must compile
  CHECK(fixed_record_size(s) == 0);
  CHECK_FALSE(has_labels(s));
}

TEST_CASE("sources with readers hand them out, and idle() is forwarded") {
  int idles = 0;
  labeled_fixed_source s;
  s.idles = &idles;
  auto r = make_reader(s);
  std::vector<std::byte> buf(8);
  r.read(0, buf);
  CHECK(buf[0] == std::byte{42});
  reader_idle(r);
  CHECK(idles == 1);
  CHECK(fixed_record_size(s) == 8);
  CHECK(has_labels(s));
  CHECK(s.label(3) == 30);
}
