// gpufeed — calling the HDF5 C library safely: one process-wide mutex, no automatic error-stack
// printing, HDF5 failures turned into typed gpufeed errors, and owners for hid_t handles.
#pragma once

#include <hdf5.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "gpufeed/detail/io/byte_source.hpp"
#include "gpufeed/detail/unique_handle.hpp"
#include "gpufeed/error.hpp"

namespace gpufeed::detail::hdf5 {

// Every HDF5 call gpufeed makes holds this mutex. A thread-safe libhdf5 already serialises calls
// behind its own global lock; this one makes the same code correct against a build without it,
// and keeps the error-stack save/restore below consistent when the auto-print setting is global.
// Recursive, so handles may be closed (destroyed) while their creator still holds it.
inline std::recursive_mutex& library_mutex() {
  static std::recursive_mutex m;
  return m;
}

// Turns off HDF5's automatic error-stack printing for the current thread (the setting is per
// thread in thread-safe builds) and restores the caller's setting on destruction, so gpufeed's
// failed probes never print to stderr and applications keep their own choice.
class error_silencer {
 public:
  error_silencer() noexcept {
    if (H5Eget_auto2(H5E_DEFAULT, &func_, &data_) < 0) func_ = nullptr;
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  }
  error_silencer(const error_silencer&) = delete;
  error_silencer& operator=(const error_silencer&) = delete;
  ~error_silencer() { H5Eset_auto2(H5E_DEFAULT, func_, data_); }

 private:
  H5E_auto2_t func_ = nullptr;
  void* data_ = nullptr;
};

// The HDF5 calls gpufeed makes: the mutex plus the silencer.
class library_lock {
 public:
  library_lock() : lock_(library_mutex()) {}

 private:
  std::unique_lock<std::recursive_mutex> lock_;
  error_silencer silence_;
};

// The innermost messages of the current thread's error stack ("truncated file: eof = ...",
// "can't open object"), then clears it. Empty when the stack is empty.
inline std::string take_error_stack() {
  struct walk_state {
    std::string text;
    int frames = 0;
  } st;
  auto cb = [](unsigned n, const H5E_error2_t* e, void* p) -> herr_t {
    auto* s = static_cast<walk_state*>(p);
    // Upward walk: innermost (most specific) frame first; keep the two most specific.
    if (n < 2 && e && e->desc && *e->desc) {
      if (!s->text.empty()) s->text += "; ";
      s->text += e->desc;
    }
    ++s->frames;
    return 0;
  };
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, cb, &st);
  H5Eclear2(H5E_DEFAULT);
  return st.text;
}

// The last OS-level failure gpufeed's file driver (index_driver.hpp) saw on this thread: HDF5
// reports a failed driver read only as a generic "read failed", so the driver records what the
// OS said here and HDF5 failures that it caused become io_error instead of format_error or
// library_error. Cleared by clear_driver_fault() before the calls it should explain.
struct driver_fault_record {
  bool set = false;
  // How the driver's read stopped: failed (errno), or ended before the size the file had when
  // it was opened (the file shrank).
  io::read_outcome read;
};
inline thread_local driver_fault_record driver_fault;

inline void clear_driver_fault() noexcept { driver_fault = driver_fault_record{}; }

// Throws io_error (naming file and record) when the driver saw an OS failure since the last
// clear_driver_fault(), consuming it.
inline void rethrow_driver_fault(const std::string& file, const std::string& message,
                                 std::optional<std::uint64_t> record = std::nullopt) {
  if (!driver_fault.set) return;
  const driver_fault_record f = driver_fault;
  clear_driver_fault();
  H5Eclear2(H5E_DEFAULT);
  io::throw_read_error(f.read, file, record, message);
}

// Throws ErrorT for a failed HDF5 call, with the call's name, its status and the library's own
// explanation from the error stack — or io_error when the call failed because the OS failed a
// read of the file (see driver_fault).
template <class ErrorT = library_error>
[[noreturn]] inline void throw_hdf5(const std::string& message, const std::string& file,
                                    const char* api, long long status = -1,
                                    std::optional<std::uint64_t> record = std::nullopt) {
  rethrow_driver_fault(file, message + " (" + api + ")", record);
  error_context ctx;
  ctx.file = file;
  ctx.record = record;
  ctx.api = api;
  ctx.status = status;
  ctx.status_text = take_error_stack();
  throw ErrorT(message, std::move(ctx));
}

// format_error about `file` (and `record`) that HDF5 did not report: gpufeed's own checks.
[[noreturn]] inline void format_fail(const std::string& message, const std::string& file,
                                     std::optional<std::uint64_t> record = std::nullopt) {
  error_context ctx;
  ctx.file = file;
  ctx.record = record;
  throw format_error(message, std::move(ctx));
}

// Owner of one hid_t, closed with the H5?close function it was made for. Move-only. Closing
// takes the library mutex, so an owner may be destroyed on any thread.
struct close_id {
  static constexpr hid_t null = H5I_INVALID_HID;
  herr_t (*close)(hid_t) = nullptr;  // H5Dclose, H5Fclose, ...
  close_id() noexcept = default;
  close_id(herr_t (*f)(hid_t)) noexcept : close(f) {}  // NOLINT: handle(id, H5Dclose)
  void operator()(hid_t id) const noexcept {
    if (id < 0 || !close) return;
    std::lock_guard<std::recursive_mutex> g(library_mutex());
    error_silencer s;
    close(id);
  }
};
class handle : public unique_handle<hid_t, close_id> {  // a class: a using would be shadowed
 public:
  using unique_handle::unique_handle;
};

// Wraps the result of an H5?open/create/get call, throwing ErrorT when it failed. The caller
// holds a library_lock.
template <class ErrorT = library_error>
inline handle checked(hid_t id, herr_t (*close)(hid_t), const char* api, const std::string& what,
                      const std::string& file) {
  if (id < 0) throw_hdf5<ErrorT>(what, file, api, static_cast<long long>(id));
  return handle(id, close);
}

// Throws library_error when an herr_t/htri_t/int result is negative. The caller holds a lock.
template <class T>
inline T check(T status, const char* api, const std::string& what, const std::string& file) {
  if (status < 0) throw_hdf5(what, file, api, static_cast<long long>(status));
  return status;
}

}  // namespace gpufeed::detail::hdf5
