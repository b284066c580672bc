// gpufeed::detail::image::nvjpeg — move-only owners of nvJPEG's library handle (nvjpegHandle_t)
// and JPEG state (nvjpegJpegState_t), made through a loaded library (nvjpeg_library.hpp).
//
//   nvjpeg::handle h = nvjpeg::create_handle(lib, nvjpeg::backend::hardware);  // library_error
//   nvjpeg::jpeg_state st = nvjpeg::create_jpeg_state(lib, h.get());
//
// Contracts:
// - Each owner destroys what it holds exactly once, through the destroy function of the library
//   that made it (carried with the value: the library stays loaded for the life of the process,
//   so the pointer stays valid). Moves leave the source empty; destructors never throw, and a
//   failed destroy is reported on stderr (nothing else can be done with it there).
// - A JPEG state must be destroyed before the handle it was made with: an object holding both
//   declares the handle first (members are destroyed in reverse order).
// - try_create_* return the status and leave `out` empty unless it is success; create_* throw
//   library_error naming the call ("nvjpegCreateEx(NVJPEG_BACKEND_HARDWARE)") and the status.
//   A library that is not ok() answers NVJPEG_STATUS_NOT_INITIALIZED without a call.
#pragma once

#include <string>

#include "gpufeed/detail/image/nvjpeg_api.hpp"
#include "gpufeed/detail/image/nvjpeg_check.hpp"
#include "gpufeed/detail/image/nvjpeg_library.hpp"
#include "gpufeed/detail/unique_handle.hpp"

namespace gpufeed::detail::image::nvjpeg {

struct handle_close {
  status (*destroy)(handle_t) = nullptr;
  void operator()(handle_t h) const noexcept {
    if (destroy) log_failure(destroy(h), "nvjpegDestroy");
  }
};
using handle = unique_handle<handle_t, handle_close>;

struct jpeg_state_close {
  status (*destroy)(jpeg_state_t) = nullptr;
  void operator()(jpeg_state_t s) const noexcept {
    if (destroy) log_failure(destroy(s), "nvjpegJpegStateDestroy");
  }
};
using jpeg_state = unique_handle<jpeg_state_t, jpeg_state_close>;

// nvjpegCreateEx with the library's default allocators.
[[nodiscard]] inline status try_create_handle(const library& lib, backend b, handle& out,
                                              unsigned flags = flags_default) noexcept {
  out.reset();
  if (!lib.ok()) return status::not_initialized;
  handle_t h = nullptr;
  const status s = lib.api().create_ex(b, nullptr, nullptr, flags, &h);
  if (s == status::success) out = handle(h, handle_close{lib.api().destroy});
  return s;
}

inline handle create_handle(const library& lib, backend b, unsigned flags = flags_default) {
  handle h;
  check(try_create_handle(lib, b, h, flags),
        std::string("nvjpegCreateEx(") + backend_name(b) + ")");
  return h;
}

// nvjpegJpegStateCreate for a handle made through `lib`.
[[nodiscard]] inline status try_create_jpeg_state(const library& lib, handle_t h,
                                                  jpeg_state& out) noexcept {
  out.reset();
  if (!lib.ok()) return status::not_initialized;
  jpeg_state_t st = nullptr;
  const status s = lib.api().jpeg_state_create(h, &st);
  if (s == status::success) out = jpeg_state(st, jpeg_state_close{lib.api().jpeg_state_destroy});
  return s;
}

inline jpeg_state create_jpeg_state(const library& lib, handle_t h) {
  jpeg_state st;
  check(try_create_jpeg_state(lib, h, st), "nvjpegJpegStateCreate");
  return st;
}

}  // namespace gpufeed::detail::image::nvjpeg
