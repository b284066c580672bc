// nvJPEG loaded at run time: a missing library, a library without a symbol, versions, failing
// calls turned into gpufeed errors, the handle owners (each handle destroyed exactly once, states
// before their handle), the capability probe's fallbacks and notices, and the batched decoder's
// routing of each JPEG (GPU, CPU fallback, or a typed error naming shard and record). All through a fake
// libnvjpeg (fake_nvjpeg.cpp) named by GPUFEED_NVJPEG_LIBRARY: host-only, no GPU, no nvJPEG.
#include <dlfcn.h>
#include <doctest/doctest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "gpufeed/detail/image/nvjpeg_batch_plan.hpp"
#include "gpufeed/detail/image/nvjpeg_check.hpp"
#include "gpufeed/detail/image/nvjpeg_handles.hpp"
#include "gpufeed/detail/image/nvjpeg_library.hpp"
#include "gpufeed/image/nvjpeg_probe.hpp"

namespace nv = gpufeed::detail::image::nvjpeg;
using gpufeed::image::nvjpeg_backend;
using gpufeed::image::probe_nvjpeg;

namespace {

// Where the build put a fake library, or (for test programs copied elsewhere) next to the test
// program or in ../lib beside it; "" when nowhere.
std::string fake_path(const char* built) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(built, ec)) return built;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return {};
  const fs::path name = fs::path(built).filename();
  for (const fs::path& p : {exe.parent_path() / name, exe.parent_path() / ".." / "lib" / name})
    if (fs::exists(p, ec)) return fs::absolute(p, ec).string();
  return {};
}

// Sets (or, with nullptr, unsets) an environment variable for one scope.
class env_var {
 public:
  env_var(const char* name, const char* value) : name_(name) {
    if (const char* old = ::getenv(name)) old_ = old, had_ = true;
    if (value)
      ::setenv(name, value, 1);
    else
      ::unsetenv(name);
  }
  env_var(const env_var&) = delete;
  env_var& operator=(const env_var&) = delete;
  ~env_var() {
    if (had_)
      ::setenv(name_, old_.c_str(), 1);
    else
      ::unsetenv(name_);
  }

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

// The fake's counters (the same layout as its gpufeed_fake_nvjpeg_tally).
struct tally {
  int handles_created, handles_destroyed, states_created, states_destroyed;
  int bad_destroys, states_outliving_handle;
};

// The fake, opened by this test too (the loader returns the same instance), for its counters.
class fake {
 public:
  fake() : path_(fake_path(GPUFEED_FAKE_NVJPEG)) {
    REQUIRE_MESSAGE(!path_.empty(), "fake nvJPEG not found (" GPUFEED_FAKE_NVJPEG
                                    ", nor next to this test program or in ../lib beside it)");
    lib_ = ::dlopen(path_.c_str(), RTLD_NOW | RTLD_LOCAL);
    REQUIRE(lib_ != nullptr);
    counts_ = reinterpret_cast<void (*)(tally*)>(::dlsym(lib_, "gpufeed_fake_nvjpeg_counts"));
    reset_ = reinterpret_cast<void (*)()>(::dlsym(lib_, "gpufeed_fake_nvjpeg_reset"));
    REQUIRE_MESSAGE((counts_ && reset_), "the fake nvJPEG has no counters");
    reset_();
  }
  fake(const fake&) = delete;
  fake& operator=(const fake&) = delete;
  ~fake() { ::dlclose(lib_); }

  [[nodiscard]] const std::string& path() const { return path_; }
  [[nodiscard]] tally counts() const {
    tally t{};
    counts_(&t);
    return t;
  }

 private:
  std::string path_;
  void* lib_ = nullptr;
  void (*counts_)(tally*) = nullptr;
  void (*reset_)() = nullptr;
};

// Every handle and state made was destroyed exactly once, states before their handle.
void check_balanced(const tally& t, int handles, int states) {
  CHECK(t.handles_created == handles);
  CHECK(t.handles_destroyed == handles);
  CHECK(t.states_created == states);
  CHECK(t.states_destroyed == states);
  CHECK(t.bad_destroys == 0);
  CHECK(t.states_outliving_handle == 0);
}

}  // namespace

TEST_CASE("nvJPEG missing: the loader's words, the CPU path and why") {
  const std::string p = "/nonexistent-gpufeed/libnvjpeg.so.13";
  const env_var lib(nv::library_env, p.c_str());
  const nv::library l = nv::library::load();
  CHECK_FALSE(l.ok());
  CHECK_FALSE(l.found());
  CHECK(l.path().empty());
  const std::string why = "nvJPEG not found at GPUFEED_NVJPEG_LIBRARY=" + p + " (" + p +
                          ": cannot open shared object file: No such file or directory)";
  CHECK(l.why_not() == why);

  const auto cap = probe_nvjpeg();
  CHECK_FALSE(cap.library_found);
  CHECK_FALSE(cap.gpu_decode());
  CHECK(cap.backend == nvjpeg_backend::none);
  CHECK(cap.version().empty());
  CHECK(cap.refused.empty());
  CHECK(cap.notice == "JPEG decoding stays on the CPU: " + why);
}

TEST_CASE("nvJPEG searched by name: every name tried, each with the loader's words") {
  const nv::library l({"libnvjpeg-gpufeed-missing.so.13", "libnvjpeg-gpufeed-missing.so"});
  CHECK_FALSE(l.found());
  CHECK(l.why_not() ==
        "nvJPEG not found (libnvjpeg-gpufeed-missing.so.13: cannot open shared object file: No "
        "such file or directory; libnvjpeg-gpufeed-missing.so: cannot open shared object file: "
        "No such file or directory)");
}

TEST_CASE("nvJPEG without a symbol gpufeed needs is refused, naming the symbol") {
  const std::string p = fake_path(GPUFEED_FAKE_NVJPEG_PARTIAL);
  REQUIRE(!p.empty());
  const env_var lib(nv::library_env, p.c_str());
  const nv::library l = nv::library::load();
  CHECK(l.found());
  CHECK_FALSE(l.ok());
  CHECK(l.path() == p);
  CHECK(l.why_not() == p + " has no nvjpegDecodeBatched: not an nvJPEG this gpufeed can use");
  const auto cap = probe_nvjpeg();
  CHECK(cap.library_found);
  CHECK(cap.library == p);
  CHECK_FALSE(cap.gpu_decode());
  CHECK(cap.notice == "JPEG decoding stays on the CPU: " + l.why_not());
}

TEST_CASE("nvJPEG's version: reported, and refused below 12.0.0 or when unreadable") {
  const fake f;
  const env_var lib(nv::library_env, f.path().c_str());
  SUBCASE("reported") {
    const nv::library l = nv::library::load();
    REQUIRE(l.ok());
    CHECK(l.why_not().empty());
    CHECK(l.library_version() == nv::version{13, 0, 1});
    CHECK(l.library_version().text() == "13.0.1");
  }
  SUBCASE("12.0.0 is accepted") {
    const env_var v("GPUFEED_FAKE_NVJPEG_VERSION", "12.0.0");
    CHECK(nv::library::load().ok());
  }
  SUBCASE("too old") {
    const env_var v("GPUFEED_FAKE_NVJPEG_VERSION", "11.9.3");
    const nv::library l = nv::library::load();
    CHECK(l.found());
    CHECK_FALSE(l.ok());
    CHECK(l.library_version() == nv::version{11, 9, 3});
    CHECK(l.why_not() == "nvJPEG 11.9.3 (" + f.path() +
                             ") is older than 12.0.0, the oldest this gpufeed can use");
    const auto cap = probe_nvjpeg();
    CHECK(cap.version() == "11.9.3");
    CHECK_FALSE(cap.gpu_decode());
    CHECK(cap.notice == "JPEG decoding stays on the CPU: " + l.why_not());
  }
  SUBCASE("unreadable") {
    const env_var v("GPUFEED_FAKE_NVJPEG_PROPERTY", "8");
    const nv::library l = nv::library::load();
    CHECK_FALSE(l.ok());
    CHECK(l.library_version() == nv::version{});
    CHECK(l.why_not() ==
          "nvjpegGetProperty(MAJOR_VERSION) returned NVJPEG_STATUS_INTERNAL_ERROR (" + f.path() +
              ")");
  }
  check_balanced(f.counts(), 0, 0);
}

TEST_CASE("a failing nvJPEG call is a library_error naming the call and the status") {
  const fake f;
  const env_var lib(nv::library_env, f.path().c_str());
  const env_var create("GPUFEED_FAKE_NVJPEG_CREATE", "3:7,0:5");
  const nv::library l = nv::library::load();
  REQUIRE(l.ok());
  try {
    (void)nv::create_handle(l, nv::backend::hardware);
    FAIL("nvjpegCreateEx's failure was not reported");
  } catch (const gpufeed::library_error& e) {
    CHECK(e.api() == "nvjpegCreateEx(NVJPEG_BACKEND_HARDWARE)");
    CHECK(e.status() == 7);
    CHECK(e.context().status_text == "NVJPEG_STATUS_ARCH_MISMATCH");
    CHECK(e.describe() == "nvJPEG call failed [nvjpegCreateEx(NVJPEG_BACKEND_HARDWARE) returned 7 "
                          "(NVJPEG_STATUS_ARCH_MISMATCH)]");
  }
  nv::handle h;
  CHECK(nv::try_create_handle(l, nv::backend::default_backend, h) == nv::status::allocator_failure);
  CHECK_FALSE(h.valid());
  CHECK(nv::try_create_handle(l, nv::backend::gpu_hybrid, h) == nv::status::success);
  CHECK(h.valid());
  {
    const env_var state("GPUFEED_FAKE_NVJPEG_STATE", "6");
    try {
      (void)nv::create_jpeg_state(l, h.get());
      FAIL("nvjpegJpegStateCreate's failure was not reported");
    } catch (const gpufeed::library_error& e) {
      CHECK(e.describe() == "nvJPEG call failed [nvjpegJpegStateCreate returned 6 "
                            "(NVJPEG_STATUS_EXECUTION_FAILED)]");
    }
  }
  h.reset();
  check_balanced(f.counts(), 1, 0);

  // A library that is not ok() makes nothing and calls nothing.
  const nv::library none({"libnvjpeg-gpufeed-missing.so"});
  CHECK(nv::try_create_handle(none, nv::backend::default_backend, h) ==
        nv::status::not_initialized);
  CHECK_THROWS_AS((void)nv::create_handle(none, nv::backend::default_backend),
                  gpufeed::library_error);
}

TEST_CASE("decode calls: a record's bad bytes are corrupt_error with its shard and record") {
  const fake f;
  const env_var lib(nv::library_env, f.path().c_str());
  const nv::library l = nv::library::load();
  REQUIRE(l.ok());
  const nv::handle h = nv::create_handle(l, nv::backend::default_backend);
  gpufeed::error_context where;
  where.file = "train-0003.h5";
  where.record = 41;
  int comps = 0, w[4] = {}, hh[4] = {};
  nv::chroma_subsampling css{};
  auto info = [&](std::vector<unsigned char> bytes) {
    nv::check_decode(
        l.api().get_image_info(h.get(), bytes.data(), bytes.size(), &comps, &css, w, hh),
        "nvjpegGetImageInfo", where);
  };
  info({0xFF, 0xD8, 0xFF, 0xE0});
  CHECK(comps == 3);
  CHECK(css == nv::chroma_subsampling::css_420);
  CHECK(w[0] == 16);
  CHECK(hh[1] == 8);
  try {
    info({'n', 'o', 't', ' ', 'j', 'p', 'e', 'g'});
    FAIL("bad bytes were accepted");
  } catch (const gpufeed::corrupt_error& e) {
    CHECK(e.describe() == "corrupt JPEG: nvJPEG cannot parse it [file 'train-0003.h5', record 41, "
                          "nvjpegGetImageInfo returned 3 (NVJPEG_STATUS_BAD_JPEG)]");
  }
  try {
    info({0xFF, 0xD8, 0xFF});
    FAIL("a cut-short JPEG was accepted");
  } catch (const gpufeed::corrupt_error& e) {
    CHECK(e.record() == 41u);
    CHECK(e.context().status_text == "NVJPEG_STATUS_INCOMPLETE_BITSTREAM");
  }
  CHECK_THROWS_AS(nv::check_decode(nv::status::jpeg_not_supported, "nvjpegDecodeJpegHost", where),
                  gpufeed::unsupported_error);
  // The library's own failures stay library_error on a decode call; BAD_JPEG outside one too.
  CHECK_THROWS_AS(nv::check_decode(nv::status::execution_failed, "nvjpegDecodeBatched", where),
                  gpufeed::library_error);
  CHECK_THROWS_AS(nv::check(nv::status::bad_jpeg, "nvjpegCreateEx"), gpufeed::library_error);
  CHECK_NOTHROW(nv::check_decode(nv::status::success, "nvjpegDecodeJpegHost", where));
}

TEST_CASE("status and backend names are NVIDIA's") {
  const char* names[] = {"NVJPEG_STATUS_SUCCESS", "NVJPEG_STATUS_NOT_INITIALIZED",
                         "NVJPEG_STATUS_INVALID_PARAMETER", "NVJPEG_STATUS_BAD_JPEG",
                         "NVJPEG_STATUS_JPEG_NOT_SUPPORTED", "NVJPEG_STATUS_ALLOCATOR_FAILURE",
                         "NVJPEG_STATUS_EXECUTION_FAILED", "NVJPEG_STATUS_ARCH_MISMATCH",
                         "NVJPEG_STATUS_INTERNAL_ERROR",
                         "NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED",
                         "NVJPEG_STATUS_INCOMPLETE_BITSTREAM"};
  for (int i = 0; i < 11; ++i) CHECK(std::string(nv::status_name(nv::status(i))) == names[i]);
  CHECK(std::string(nv::status_name(nv::status(99))) == "NVJPEG_STATUS_UNKNOWN");
  CHECK(std::string(nv::backend_name(nv::backend::hardware)) == "NVJPEG_BACKEND_HARDWARE");
  CHECK(std::string(nv::backend_name(nv::backend::default_backend)) == "NVJPEG_BACKEND_DEFAULT");
  CHECK(std::string(nv::backend_name(nv::backend::gpu_hybrid)) == "NVJPEG_BACKEND_GPU_HYBRID");
  // The layout of nvjpegImage_t on LP64: four pointers, then four size_t pitches.
  static_assert(sizeof(nv::image_planes) == 8 * sizeof(void*));
  static_assert(offsetof(nv::image_planes, pitch) == 4 * sizeof(void*));
}

TEST_CASE("handle owners destroy exactly once, through the library, states first") {
  const fake f;
  const env_var lib(nv::library_env, f.path().c_str());
  const nv::library l = nv::library::load();
  REQUIRE(l.ok());
  SUBCASE("moves hand ownership on") {
    {
      nv::handle a = nv::create_handle(l, nv::backend::hardware);
      nv::handle b(std::move(a));
      CHECK_FALSE(a.valid());
      nv::handle c = nv::create_handle(l, nv::backend::default_backend);
      c = std::move(b);  // swaps: b's destructor destroys c's old handle
      nv::jpeg_state s = nv::create_jpeg_state(l, c.get());
      nv::jpeg_state t(std::move(s));
      CHECK(t.valid());
      CHECK(f.counts().handles_destroyed == 0);
    }
    check_balanced(f.counts(), 2, 1);
  }
  SUBCASE("a library moved away keeps its owners working") {
    nv::library moved = nv::library::load();
    nv::handle h = nv::create_handle(moved, nv::backend::default_backend);
    const nv::library gone(std::move(moved));
    CHECK_FALSE(moved.ok());
    h.reset();
    check_balanced(f.counts(), 1, 0);
  }
  SUBCASE("the fake sees a state outliving its handle (the order owners must keep)") {
    nv::handle h = nv::create_handle(l, nv::backend::default_backend);
    nv::jpeg_state s = nv::create_jpeg_state(l, h.get());
    h.reset();
    s.reset();
    CHECK(f.counts().states_outliving_handle == 1);
  }
}

TEST_CASE("probe: the hardware backend, with its engines") {
  const fake f;
  const env_var lib(nv::library_env, f.path().c_str());
  const auto cap = probe_nvjpeg();
  CHECK(cap.library_found);
  CHECK(cap.library == f.path());
  CHECK(cap.version() == "13.0.1");
  CHECK(cap.backend == nvjpeg_backend::hardware);
  CHECK(cap.hardware());
  CHECK(cap.hardware_engines == 7);
  CHECK(cap.cores_per_engine == 1);
  CHECK(cap.refused.empty());
  CHECK(cap.notice.empty());
  check_balanced(f.counts(), 1, 1);
}

TEST_CASE("probe: no hardware backend falls back, saying why") {
  const fake f;
  const env_var lib(nv::library_env, f.path().c_str());
  SUBCASE("nvjpegCreateEx refuses the hardware backend") {
    const env_var create("GPUFEED_FAKE_NVJPEG_CREATE", "3:7");
    const auto cap = probe_nvjpeg();
    CHECK(cap.backend == nvjpeg_backend::default_backend);
    CHECK(cap.gpu_decode());
    CHECK_FALSE(cap.hardware());
    CHECK(cap.hardware_engines == 0);
    REQUIRE(cap.refused.size() == 1);
    CHECK(cap.refused[0] ==
          "NVJPEG_BACKEND_HARDWARE: nvjpegCreateEx returned NVJPEG_STATUS_ARCH_MISMATCH");
    CHECK(cap.notice == "nvJPEG's hardware backend does not work (NVJPEG_BACKEND_HARDWARE: "
                        "nvjpegCreateEx returned NVJPEG_STATUS_ARCH_MISMATCH): JPEGs decode on the "
                        "GPU with the default backend");
    check_balanced(f.counts(), 1, 1);
  }
  SUBCASE("a hardware handle with no engine") {
    const env_var engines("GPUFEED_FAKE_NVJPEG_ENGINES", "0,0");
    const auto cap = probe_nvjpeg();
    CHECK(cap.backend == nvjpeg_backend::default_backend);
    CHECK(cap.refused == std::vector<std::string>{"NVJPEG_BACKEND_HARDWARE: "
                                                  "nvjpegGetHardwareDecoderInfo reports no JPEG "
                                                  "engine"});
    check_balanced(f.counts(), 2, 1);
  }
  SUBCASE("hardware and default refused: GPU hybrid") {
    const env_var create("GPUFEED_FAKE_NVJPEG_CREATE", "3:7,0:6");
    const auto cap = probe_nvjpeg();
    CHECK(cap.backend == nvjpeg_backend::gpu_hybrid);
    CHECK(cap.refused.size() == 2);
    check_balanced(f.counts(), 1, 1);
  }
  SUBCASE("the default backend preferred: hardware is not tried") {
    const auto cap = probe_nvjpeg(nvjpeg_backend::default_backend);
    CHECK(cap.backend == nvjpeg_backend::default_backend);
    CHECK(cap.notice.empty());
    check_balanced(f.counts(), 1, 1);
  }
}

TEST_CASE("probe: no backend works, so the CPU decodes, and the notice names every failure") {
  const fake f;
  const env_var lib(nv::library_env, f.path().c_str());
  SUBCASE("every nvjpegCreateEx fails") {
    const env_var create("GPUFEED_FAKE_NVJPEG_CREATE", "3:7,0:6,2:6");
    const auto cap = probe_nvjpeg();
    CHECK_FALSE(cap.gpu_decode());
    CHECK(cap.notice ==
          "JPEG decoding stays on the CPU: nvJPEG 13.0.1 (" + f.path() +
              ") works with no backend (NVJPEG_BACKEND_HARDWARE: nvjpegCreateEx returned "
              "NVJPEG_STATUS_ARCH_MISMATCH; NVJPEG_BACKEND_DEFAULT: nvjpegCreateEx returned "
              "NVJPEG_STATUS_EXECUTION_FAILED; NVJPEG_BACKEND_GPU_HYBRID: nvjpegCreateEx returned "
              "NVJPEG_STATUS_EXECUTION_FAILED)");
    check_balanced(f.counts(), 0, 0);
  }
  SUBCASE("handles are made but no JPEG state: each handle destroyed once") {
    const env_var state("GPUFEED_FAKE_NVJPEG_STATE", "5");
    const auto cap = probe_nvjpeg();
    CHECK_FALSE(cap.gpu_decode());
    CHECK(cap.refused.size() == 3);
    CHECK(cap.refused[2] ==
          "NVJPEG_BACKEND_GPU_HYBRID: nvjpegJpegStateCreate returned "
          "NVJPEG_STATUS_ALLOCATOR_FAILURE");
    check_balanced(f.counts(), 3, 0);
  }
}

namespace {
// A fake header the fake library reads (fake_nvjpeg.cpp): FF D8 'G' 'F', width, height (big
// endian), components, subsampling, flags.
std::vector<std::byte> fake_jpeg(std::uint32_t w, std::uint32_t h, int components,
                                 nv::chroma_subsampling css, int flags = 0, bool eoi = true) {
  std::vector<std::byte> b;
  for (int v : {0xFF, 0xD8, int{'G'}, int{'F'}}) b.push_back(static_cast<std::byte>(v));
  for (std::uint32_t v : {w, h})
    for (int shift = 24; shift >= 0; shift -= 8) b.push_back(static_cast<std::byte>((v >> shift) & 0xFF));
  b.push_back(static_cast<std::byte>(components));
  b.push_back(static_cast<std::byte>(static_cast<signed char>(static_cast<int>(css))));
  b.push_back(static_cast<std::byte>(flags));
  if (eoi)
    for (int v : {0xFF, 0xD9}) b.push_back(static_cast<std::byte>(v));
  return b;
}

template <class E>
std::string error_of(const nv::planned_image& p, const gpufeed::error_context*& ctx) {
  try {
    std::rethrow_exception(p.error);
  } catch (const E& e) {
    static gpufeed::error_context keep;
    keep = e.context();
    ctx = &keep;
    return e.what();
  } catch (...) {
  }
  return "<another error>";
}
}  // namespace

TEST_CASE("batch plan: GPU, CPU fallback or a typed error naming shard and record") {
  const fake f;
  const env_var lib_env(nv::library_env, f.path().c_str());
  const nv::library lib = nv::library::load();
  REQUIRE(lib.ok());
  for (bool hardware : {false, true}) {
    CAPTURE(hardware);
    const nv::handle h = nv::create_handle(lib, hardware ? nv::backend::hardware : nv::backend::default_backend);
    using css = nv::chroma_subsampling;
    const std::vector<std::vector<std::byte>> bytes = {
        fake_jpeg(640, 480, 3, css::css_420),              // 0 gpu
        fake_jpeg(100, 100, 1, css::css_gray),             // 1 gpu
        fake_jpeg(300, 200, 4, css::css_444),              // 2 cpu: CMYK
        fake_jpeg(300, 200, 3, css::css_411),              // 3 cpu: 4:1:1
        fake_jpeg(300, 200, 3, css::css_420, 1),           // 4 hardware says no (progressive)
        fake_jpeg(300, 200, 3, css::css_420, 2),           // 5 not supported by GetImageInfo
        fake_jpeg(70000, 70000, 3, css::css_420),          // 6 over max_pixels
        fake_jpeg(0, 10, 3, css::css_420),                 // 7 size 0: corrupt
        {std::byte{0x12}, std::byte{0x34}, std::byte{0x56}},  // 8 not a JPEG: the CPU's to judge
        {std::byte{0xFF}, std::byte{0xD8}, std::byte{0}},  // 9 cut short: corrupt
        fake_jpeg(640, 480, 3, css::css_420, 0, false),    // 10 no EOI: the CPU's to judge
    };
    std::vector<nv::batch_item> items;
    for (std::size_t i = 0; i < bytes.size(); ++i) {
      gpufeed::error_context where;
      where.file = "shard-3.lmdb";
      where.record = 100 + i;
      items.push_back({bytes[i], where});
    }
    nv::plan_limits limits;
    limits.max_pixels = 4096ull * 4096;
    limits.hardware = hardware;
    const auto plan = nv::plan_batch(lib, h.get(), items, limits);
    REQUIRE(plan.size() == items.size());
    CHECK(plan[0].to == nv::route::gpu);
    CHECK(plan[0].width == 640);
    CHECK(plan[0].height == 480);
    CHECK(nv::decoded_bytes(plan[0]) == 640u * 480 * 3);
    CHECK(plan[1].to == nv::route::gpu);
    CHECK(plan[2].to == nv::route::cpu);
    CHECK(plan[2].why == "4 components");
    CHECK(plan[3].to == nv::route::cpu);
    CHECK(plan[4].to == (hardware ? nv::route::cpu : nv::route::gpu));
    CHECK(plan[5].to == nv::route::cpu);
    const gpufeed::error_context* ctx = nullptr;
    CHECK(plan[6].to == nv::route::failed);
    CHECK(nv::decoded_bytes(plan[6]) == 0);
    CHECK(error_of<gpufeed::unsupported_error>(plan[6], ctx).find("70000 x 70000 pixels exceeds max_pixels") != std::string::npos);
    REQUIRE(ctx);
    CHECK(ctx->file == "shard-3.lmdb");
    CHECK(ctx->record == 106u);
    CHECK(plan[8].to == nv::route::cpu);
    CHECK(plan[8].why == "not a JPEG");
    CHECK(nv::decoded_bytes(plan[8]) == 0);
    CHECK(plan[10].to == nv::route::cpu);
    CHECK(plan[10].why == "no EOI marker at its end (cut short)");
    for (std::size_t i : {7u, 9u}) {
      CAPTURE(i);
      CHECK(plan[i].to == nv::route::failed);
      ctx = nullptr;
      CHECK(error_of<gpufeed::corrupt_error>(plan[i], ctx).find("corrupt JPEG") != std::string::npos);
      REQUIRE(ctx);
      CHECK(ctx->record == 100 + i);
    }
  }
}

TEST_CASE("batch plan: nvJPEG's own failure is a library_error, not a record's") {
  const fake f;
  const env_var lib_env(nv::library_env, f.path().c_str());
  const nv::library lib = nv::library::load();
  REQUIRE(lib.ok());
  const nv::handle h = nv::create_handle(lib, nv::backend::default_backend);
  const auto ok = fake_jpeg(8, 8, 3, nv::chroma_subsampling::css_420);
  const std::vector<nv::batch_item> items = {{ok, {}}};
  // A handle the fake does not know: nvjpegGetImageInfo answers INVALID_PARAMETER.
  CHECK_THROWS_AS(nv::plan_batch(lib, reinterpret_cast<nv::handle_t>(const_cast<nv::library*>(&lib)), items, {}),
                  gpufeed::library_error);
}
