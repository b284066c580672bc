// gpufeed::image — can this machine decode JPEGs on its GPU with nvJPEG, and how.
//
//   const auto cap = gpufeed::image::probe_nvjpeg();   // hardware engines first
//   if (!cap.notice.empty()) std::fprintf(stderr, "gpufeed: %s\n", cap.notice.c_str());
//   if (cap.gpu_decode()) ...                          // cap.backend: which one works
//
// Contracts:
// - Never throws (but std::bad_alloc): a machine without nvJPEG, without a GPU or with a library
//   gpufeed refuses gets an answer, and `notice` says why in one line.
// - Loads nvJPEG at run time (GPUFEED_NVJPEG_LIBRARY, else libnvjpeg.so.13, else libnvjpeg.so;
//   see detail/image/nvjpeg_library.hpp), then tries the backends from `preference` on, in the
//   order hardware, default, GPU hybrid: a backend works when nvjpegCreateEx makes a handle with
//   it and nvjpegJpegStateCreate a JPEG state on that handle. For the hardware backend the
//   handle must also report at least one JPEG engine (nvjpegGetHardwareDecoderInfo; 0 engines
//   is the library's way of saying there is no hardware decoder). The first that works is
//   `backend`; everything the probe made is destroyed before it returns.
// - notice: empty when the preferred backend works. Otherwise one line: with no backend,
//   "JPEG decoding stays on the CPU: " and why (not found, with the loader's words; the missing
//   symbol; the version; every backend's failed call and status); with a later backend, why the
//   preferred one did not work and which one is used.
#pragma once

#include <string>
#include <vector>

#include "gpufeed/detail/image/nvjpeg_handles.hpp"
#include "gpufeed/detail/image/nvjpeg_library.hpp"

namespace gpufeed::image {

// The nvJPEG backends gpufeed uses, in the order the probe falls back through them.
enum class nvjpeg_backend { none, hardware, default_backend, gpu_hybrid };

constexpr const char* to_string(nvjpeg_backend b) noexcept {
  switch (b) {
    case nvjpeg_backend::hardware: return "hardware";
    case nvjpeg_backend::default_backend: return "default";
    case nvjpeg_backend::gpu_hybrid: return "GPU hybrid";
    case nvjpeg_backend::none: break;
  }
  return "none";
}

struct nvjpeg_capability {
  bool library_found = false;  // a file opened (it may still have been refused: see notice)
  std::string library;         // that file, as given to dlopen; empty when none opened
  int version_major = 0, version_minor = 0, version_patch = 0;  // 0.0.0 when not read
  nvjpeg_backend backend = nvjpeg_backend::none;  // the backend that works; none: CPU decoding
  unsigned hardware_engines = 0;  // JPEG engines, and cores per engine, when backend is hardware
  unsigned cores_per_engine = 0;
  // Each backend tried before `backend` and why it did not work ("NVJPEG_BACKEND_HARDWARE:
  // nvjpegCreateEx returned NVJPEG_STATUS_ARCH_MISMATCH").
  std::vector<std::string> refused;
  std::string notice;  // one line; empty when the preferred backend works

  [[nodiscard]] bool gpu_decode() const noexcept { return backend != nvjpeg_backend::none; }
  [[nodiscard]] bool hardware() const noexcept { return backend == nvjpeg_backend::hardware; }
  // "13.0.1"; empty when not read.
  [[nodiscard]] std::string version() const {
    if (version_major == 0 && version_minor == 0 && version_patch == 0) return {};
    return std::to_string(version_major) + "." + std::to_string(version_minor) + "." +
           std::to_string(version_patch);
  }
};

namespace detail_probe {

namespace nv = gpufeed::detail::image::nvjpeg;

inline nv::backend to_nvjpeg(nvjpeg_backend b) noexcept {
  switch (b) {
    case nvjpeg_backend::hardware: return nv::backend::hardware;
    case nvjpeg_backend::gpu_hybrid: return nv::backend::gpu_hybrid;
    default: return nv::backend::default_backend;
  }
}

// Empty when `b` works on `lib`; else why not. Fills the engine counts for the hardware backend.
inline std::string try_backend(const nv::library& lib, nvjpeg_backend b, nvjpeg_capability& cap) {
  const nv::backend nb = to_nvjpeg(b);
  const std::string prefix = std::string(nv::backend_name(nb)) + ": ";
  nv::handle h;  // declared before the state: destroyed after it
  nv::jpeg_state st;
  if (const nv::status s = nv::try_create_handle(lib, nb, h); s != nv::status::success)
    return prefix + "nvjpegCreateEx returned " + nv::status_name(s);
  unsigned engines = 0, cores = 0;
  if (b == nvjpeg_backend::hardware) {
    const nv::status s = lib.api().get_hardware_decoder_info(h.get(), &engines, &cores);
    if (s != nv::status::success)
      return prefix + "nvjpegGetHardwareDecoderInfo returned " + nv::status_name(s);
    if (engines == 0) return prefix + "nvjpegGetHardwareDecoderInfo reports no JPEG engine";
  }
  if (const nv::status s = nv::try_create_jpeg_state(lib, h.get(), st); s != nv::status::success)
    return prefix + "nvjpegJpegStateCreate returned " + nv::status_name(s);
  cap.hardware_engines = engines;
  cap.cores_per_engine = cores;
  return {};
}

}  // namespace detail_probe

inline nvjpeg_capability probe_nvjpeg(nvjpeg_backend preference = nvjpeg_backend::hardware) {
  namespace nv = gpufeed::detail::image::nvjpeg;
  nvjpeg_capability cap;
  const nv::library lib = nv::library::load();
  cap.library_found = lib.found();
  cap.library = lib.path();
  cap.version_major = lib.library_version().major;
  cap.version_minor = lib.library_version().minor;
  cap.version_patch = lib.library_version().patch;
  if (!lib.ok()) {
    cap.notice = "JPEG decoding stays on the CPU: " + lib.why_not();
    return cap;
  }
  const nvjpeg_backend order[] = {nvjpeg_backend::hardware, nvjpeg_backend::default_backend,
                                  nvjpeg_backend::gpu_hybrid};
  bool started = false;
  for (const nvjpeg_backend b : order) {
    started = started || b == preference || preference == nvjpeg_backend::none;
    if (!started) continue;
    std::string why = detail_probe::try_backend(lib, b, cap);
    if (why.empty()) {
      cap.backend = b;
      break;
    }
    cap.refused.push_back(std::move(why));
  }
  std::string refused;
  for (const std::string& r : cap.refused) refused += (refused.empty() ? "" : "; ") + r;
  if (!cap.gpu_decode())
    cap.notice = "JPEG decoding stays on the CPU: nvJPEG " + cap.version() + " (" + cap.library +
                 ") works with no backend (" + refused + ")";
  else if (!cap.refused.empty())
    cap.notice = std::string("nvJPEG's ") + to_string(preference) + " backend does not work (" +
                 refused + "): JPEGs decode on the GPU with the " + to_string(cap.backend) +
                 " backend";
  return cap;
}

}  // namespace gpufeed::image
