// detail::image::host_route, the CPU route of the GPU JPEG batch decoder, on the host: each listed
// JPEG lands at its offset with djpeg's pixels and its size; a corrupt one, and one whose decode
// exceeds its planned size, get a corrupt_error naming their record while the rest are written;
// unlisted images are not touched; lead runs once; the decode times reach the split.
#include <doctest/doctest.h>

#include <array>
#include <cstring>
#include <exception>
#include <vector>

#include "gpufeed/detail/image/host_route.hpp"
#include "image_test_util.hpp"
#include "test_util.hpp"

using namespace gpufeed;
namespace nv = gpufeed::detail::image::nvjpeg;

TEST_CASE("host_route: listed JPEGs decoded at their offsets, faults per record") {
  test::temp_dir dir("hostroute");
  const auto a = test::synthetic_picture(64, 48, 3, 1), b = test::synthetic_picture(33, 70, 3, 2);
  const auto ja = test::cjpeg(dir.path(), a, "-quality 90", "a");
  const auto jb = test::cjpeg(dir.path(), b, "-quality 85 -progressive", "b");
  const auto wa = test::djpeg(dir.path(), ja, 1, "a"), wb = test::djpeg(dir.path(), jb, 1, "b");
  std::vector<std::byte> cut(ja.begin(), ja.begin() + static_cast<std::ptrdiff_t>(ja.size() / 3));
  // Items: 0 = a, 1 = b, 2 = a cut short, 3 = b planned as smaller than it is, 4 = a, unlisted.
  const std::vector<std::vector<std::byte>> bytes{ja, jb, cut, jb, ja};
  std::vector<nv::batch_item> items(bytes.size());
  std::vector<nv::planned_image> plan(bytes.size());
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    items[i].bytes = bytes[i];
    items[i].where.file = "route.h5";
    items[i].where.record = 70 + i;
    plan[i].to = nv::route::cpu;
    const auto& p = (i == 1 || i == 3) ? b : a;
    plan[i].width = i == 3 ? 8 : p.width;
    plan[i].height = i == 3 ? 8 : p.height;
  }
  std::vector<std::size_t> at(bytes.size());
  std::size_t total = 0;
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    at[i] = total;
    total += (nv::decoded_bytes(plan[i]) + 255) / 256 * 256;
  }
  // Room for the oversized decode's bytes too, so an overrun would show rather than crash.
  std::vector<std::byte> host(total + 64 * 1024, std::byte{0x5a});
  std::vector<std::array<int, 2>> size(bytes.size());
  std::vector<std::exception_ptr> errors(bytes.size());
  detail::image::host_route route(3, true, {});
  int leads = 0;
  const std::vector<std::size_t> list{2, 0, 3, 1};
  route.decode(items, plan, list, 2, at, 256, host.data(), size, errors, [&] { ++leads; });
  CHECK(leads == 1);
  for (const std::size_t i : {std::size_t{2}, std::size_t{3}}) {
    CAPTURE(i);
    REQUIRE(errors[i]);
    try {
      std::rethrow_exception(errors[i]);
    } catch (const corrupt_error& e) {
      CHECK(e.context().file == "route.h5");
      CHECK(e.context().record == 70 + i);
    } catch (const std::exception& e) {
      FAIL("not a corrupt_error: " << e.what());
    }
  }
  CHECK_FALSE(errors[0]);
  CHECK_FALSE(errors[1]);
  CHECK_FALSE(errors[4]);
  CHECK(size[0] == std::array<int, 2>{64, 48});
  CHECK(size[1] == std::array<int, 2>{33, 70});
  CHECK(std::memcmp(host.data() + at[0], wa.data.data(), wa.data.size()) == 0);
  CHECK(std::memcmp(host.data() + at[1], wb.data.data(), wb.data.size()) == 0);
  for (std::size_t k = at[4]; k < at[4] + nv::decoded_bytes(plan[4]); ++k)
    REQUIRE(host[k] == std::byte{0x5a});
  // Item 0 was timed as forced (list[1] < 2), item 1 as moved (list[3]).
  CHECK(route.split().seconds_forced() > 0);
  CHECK(route.split().seconds_moved() > 0);
}
