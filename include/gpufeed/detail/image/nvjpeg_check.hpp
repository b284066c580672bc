// gpufeed::detail::image::nvjpeg — checked nvJPEG calls: a status other than success becomes a
// gpufeed error naming the call and the status by NVIDIA's name.
//
//   check(lib.api().create_ex(...), "nvjpegCreateEx");                 // library_error
//   check_decode(lib.api().decode_jpeg_host(...), "nvjpegDecodeJpegHost", where);
//
// Contracts:
// - check(): any failure is a library_error whose context carries api (the nvJPEG function, as
//   the caller names it), status (the number) and status_text (NVJPEG_STATUS_...), plus what
//   the caller's `where` holds.
// - check_decode(), for the calls that read a record's bytes (nvjpegGetImageInfo,
//   nvjpegJpegStreamParse, nvjpegDecodeJpegHost, nvjpegDecodeBatched, ...): the bytes' own
//   faults follow the CPU decoder's kinds (decoder.hpp), so the error policy treats a bad record
//   alike on either path. NVJPEG_STATUS_BAD_JPEG and NVJPEG_STATUS_INCOMPLETE_BITSTREAM (cut
//   short) are corrupt_error, NVJPEG_STATUS_JPEG_NOT_SUPPORTED (valid, but not for nvJPEG) is
//   unsupported_error; anything else is the library's failure, library_error. The caller passes
//   the shard as `where.file` and the record as `where.record`.
// - log_failure() never throws: for destructors, which have no one to report to but stderr.
#pragma once

#include <cstdio>
#include <source_location>
#include <string>
#include <string_view>
#include <utility>

#include "gpufeed/detail/image/nvjpeg_api.hpp"
#include "gpufeed/error.hpp"

namespace gpufeed::detail::image::nvjpeg {

// `where` with the failed call filled in.
inline error_context call_context(status s, std::string_view api, error_context where) {
  where.api = std::string(api);
  where.status = static_cast<long long>(s);
  where.status_text = status_name(s);
  return where;
}

inline void check(status s, std::string_view api, error_context where = {},
                  std::source_location loc = std::source_location::current()) {
  if (s == status::success) return;
  throw library_error("nvJPEG call failed", call_context(s, api, std::move(where)), loc);
}

inline void check_decode(status s, std::string_view api, error_context where,
                         std::source_location loc = std::source_location::current()) {
  switch (s) {
    case status::success:
      return;
    case status::bad_jpeg:
      throw corrupt_error("corrupt JPEG: nvJPEG cannot parse it",
                          call_context(s, api, std::move(where)), loc);
    case status::incomplete_bitstream:
      throw corrupt_error("corrupt JPEG: its data ends early",
                          call_context(s, api, std::move(where)), loc);
    case status::jpeg_not_supported:
      throw unsupported_error("JPEG that nvJPEG does not decode",
                              call_context(s, api, std::move(where)), loc);
    default:
      check(s, api, std::move(where), loc);
  }
}

inline void log_failure(status s, const char* api) noexcept {
  if (s == status::success) return;
  std::fprintf(stderr, "gpufeed: %s failed: %s (%d)\n", api, status_name(s), static_cast<int>(s));
}

}  // namespace gpufeed::detail::image::nvjpeg
