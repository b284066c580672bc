// gpufeed — typed errors.
//
// Every failure gpufeed reports is a gpufeed::error (derived from std::runtime_error) that carries
// the context a user needs to act on it: which shard file, which record, which library call and
// which status it returned, and where in gpufeed the check fired (in what() only in a debug build
// or with GPUFEED_ERROR_LOCATIONS=1 in the environment). The subclasses say *what kind*
// of failure it was so callers can catch precisely:
//
//   io_error        the OS refused or cut short a read/write/open (errno in status())
//   format_error    the input is not what it claims: not HDF5/LMDB, missing dataset, bad dtype,
//                   offsets that point past the data, a value that is not a Caffe Datum
//   corrupt_error   the bytes fail an integrity check: fletcher32 mismatch, corrupt deflate stream
//   unsupported_error  valid input that gpufeed cannot handle in the requested way
//   library_error   a dependency (HDF5, LMDB, zlib) returned an error status
//   cuda_error      a CUDA runtime call failed (status() is the cudaError_t value)
//   cancelled_error an operation was abandoned because its owner stopped (shutdown, stop token)
//   config_error    a caller passed an invalid setting (batch size 0, rank >= world, ...)
//
// This header is host-only: cuda_error is declared here so host code can catch it without
// including CUDA headers; it is thrown from include/gpufeed/cuda/.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <source_location>
#include <stdexcept>
#include <string>
#include <system_error>
#include <utility>

namespace gpufeed {

// Where and why a failure happened. Every field is optional; what() prints the ones that are set.
struct error_context {
  std::string file;                    // shard path, directory or other file the failure concerns
  std::optional<std::uint64_t> record; // global (or shard-local, see message) record index
  // The record's input name — the file name it had in the folder `gpufeed pack` read,
  // relative to that folder — when the source knows it (record_naming_source); empty otherwise.
  // The loader fills it in for a per-record transform's failure.
  std::string input;
  std::string api;                     // the library call that failed, e.g. "H5Dopen2", "pread"
  std::optional<long long> status;     // its status / errno / cudaError_t, when it returned one
  std::string status_text;             // a readable name for status, e.g. "cudaErrorInvalidValue"
  // Where in gpufeed the error was raised. Left empty, the error's constructor fills in its
  // caller (a default member initialiser cannot: it would name this header, or wherever the
  // context happened to be default-constructed).
  std::optional<std::source_location> where;
};

// The context of a failure that concerns one file and nothing more specific.
inline error_context file_context(std::string file) {
  error_context c;
  c.file = std::move(file);
  return c;
}

// The context of a failed OS call on `file`: the call's name, its errno and errno's text.
//   throw io_error("cannot open shard", os_call_context(path, "open", errno));
inline error_context os_call_context(std::string file, std::string api, int err,
                                     std::optional<std::uint64_t> record = std::nullopt) {
  error_context c;
  c.file = std::move(file);
  c.record = record;
  c.api = std::move(api);
  c.status = err;
  c.status_text = std::strerror(err);
  return c;
}

// The same for a std::filesystem call that reported `ec`.
inline error_context os_call_context(std::string file, std::string api, const std::error_code& ec) {
  error_context c;
  c.file = std::move(file);
  c.api = std::move(api);
  c.status = ec.value();
  c.status_text = ec.message();
  return c;
}

class error : public std::runtime_error {
 public:
  error(const std::string& message, error_context ctx,
        std::source_location where = std::source_location::current())
      : error(located(std::move(ctx), where), message) {}
  explicit error(const std::string& message,
                 std::source_location where = std::source_location::current())
      : error(message, error_context{}, where) {}

  // The message without the appended context.
  [[nodiscard]] const std::string& message() const noexcept { return message_; }
  [[nodiscard]] const error_context& context() const noexcept { return ctx_; }
  [[nodiscard]] const std::string& file() const noexcept { return ctx_.file; }
  [[nodiscard]] std::optional<std::uint64_t> record() const noexcept { return ctx_.record; }
  [[nodiscard]] const std::string& input() const noexcept { return ctx_.input; }
  [[nodiscard]] const std::string& api() const noexcept { return ctx_.api; }
  [[nodiscard]] std::optional<long long> status() const noexcept { return ctx_.status; }
  // The message and its context for people — "short read [file 'a.h5', record 7, pread
  // returned 5 (Input/output error)]", or "record transform failed: ... [file 'a.h5', record 7,
  // input 'train/cat/0042.jpg']" — without gpufeed's source location, which helps a bug
  // report but not a user (command-line tools print this).
  [[nodiscard]] std::string describe() const {
    const std::string ctx = context_text(ctx_);
    return message_ + (ctx.empty() ? "" : " [" + ctx + "]");
  }

 private:
  error(error_context&& located_ctx, const std::string& message)
      : std::runtime_error(format(message, located_ctx)),
        message_(message),
        ctx_(std::move(located_ctx)) {}

  static error_context located(error_context c, std::source_location where) {
    if (!c.where) c.where = where;
    return c;
  }
  static std::string context_text(const error_context& c) {
    std::string ctx;
    auto add = [&ctx](const std::string& part) { ctx += (ctx.empty() ? "" : ", ") + part; };
    if (!c.file.empty()) add("file '" + c.file + "'");
    if (c.record) add("record " + std::to_string(*c.record));
    if (!c.input.empty()) add("input '" + c.input + "'");
    if (!c.api.empty()) {
      std::string call = c.api;
      if (c.status) call += " returned " + std::to_string(*c.status);
      if (!c.status_text.empty()) call += " (" + c.status_text + ")";
      add(call);
    } else if (c.status) {
      add("status " + std::to_string(*c.status) +
          (c.status_text.empty() ? "" : " (" + c.status_text + ")"));
    }
    return ctx;
  }
  static std::string format(const std::string& message, const error_context& c) {
    std::string s = "gpufeed: " + message;
    const std::string ctx = context_text(c);
    if (!ctx.empty()) s += " [" + ctx + "]";
    if (show_locations() && c.where && c.where->file_name() && *c.where->file_name())
      s += " at " + std::string(c.where->file_name()) + ":" + std::to_string(c.where->line());
    return s;
  }
  // gpufeed's source location ends what() in a debug build (NDEBUG unset) or when the
  // environment sets GPUFEED_ERROR_LOCATIONS (to anything but "0"): it helps a bug report, not
  // a user. context().where holds it either way.
  static bool show_locations() noexcept {
#ifndef NDEBUG
    return true;
#else
    const char* v = std::getenv("GPUFEED_ERROR_LOCATIONS");
    return v && *v && std::strcmp(v, "0") != 0;
#endif
  }

  std::string message_;
  error_context ctx_;
};

// Explicit constructors rather than `using error::error`: nvcc 13's front end crashes on an
// inherited constructor whose default argument is std::source_location::current().
#define GPUFEED_DEFINE_ERROR(name)                                                             \
  class name : public error {                                                                  \
   public:                                                                                     \
    name(const std::string& message, error_context ctx,                                        \
         std::source_location where = std::source_location::current())                         \
        : error(message, std::move(ctx), where) {}                                             \
    explicit name(const std::string& message,                                                  \
                  std::source_location where = std::source_location::current())                \
        : error(message, where) {}                                                             \
  }

GPUFEED_DEFINE_ERROR(io_error);
GPUFEED_DEFINE_ERROR(format_error);
GPUFEED_DEFINE_ERROR(corrupt_error);
GPUFEED_DEFINE_ERROR(unsupported_error);
GPUFEED_DEFINE_ERROR(library_error);
GPUFEED_DEFINE_ERROR(cuda_error);
GPUFEED_DEFINE_ERROR(cancelled_error);
GPUFEED_DEFINE_ERROR(config_error);

#undef GPUFEED_DEFINE_ERROR

}  // namespace gpufeed
