// gpufeed::detail::image::nvjpeg::library — nvJPEG loaded at run time with dlopen, never
// linked: a gpufeed program must build and start on machines without it (CI, the development
// machines), and a machine with it decodes JPEGs on its GPU. Host-only (nvjpeg_api.hpp declares
// the ABI).
//
//   auto lib = nvjpeg::library::load();
//   if (!lib.ok()) notice(lib.why_not());         // one line: why the CPU path is used
//   lib.api().create_ex(...);                      // every entry point resolved
//
// Contracts:
// - Where it looks: the path in GPUFEED_NVJPEG_LIBRARY when that is set and not empty (then
//   nowhere else: a test or a user who names a file means that file), else `libnvjpeg.so.13`,
//   then `libnvjpeg.so`, through the dynamic loader's search (RTLD_NOW | RTLD_LOCAL).
// - ok() only when the library opened, every symbol in for_each_symbol resolved and its version
//   (nvjpegGetProperty: major, minor, patch) is at least min_version. Otherwise why_not() says
//   which of these failed: the loader's own words (dlerror) for each file tried, the first
//   missing symbol's name, the failing nvjpegGetProperty status by name, or the version found.
// - Construction never throws (but std::bad_alloc): absence is an answer, not an error.
// - A library that passed is never unloaded (no dlclose), not even by the destructor: nvJPEG's
//   handles, JPEG engines' worker threads and the CUDA runtime inside it may outlive any one
//   owner, and the process loads it once anyway (the dynamic loader counts references). So the
//   resolved function pointers stay valid for the life of the process, and the handle owners
//   (nvjpeg_handles.hpp) keep only the destroy function they need. A library refused is closed
//   again: nothing was created with it.
// - Move-only: it stands for one loading of the library and its verdict.
#pragma once

#include <dlfcn.h>

#include <cstdlib>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "gpufeed/detail/image/nvjpeg_api.hpp"

namespace gpufeed::detail::image::nvjpeg {

// The environment variable that names the library file (and turns off the search).
inline constexpr const char* library_env = "GPUFEED_NVJPEG_LIBRARY";

struct version {
  int major = 0, minor = 0, patch = 0;

  [[nodiscard]] std::string text() const {
    return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
  }
  friend constexpr auto operator<=>(const version&, const version&) = default;
};

// The oldest nvJPEG accepted: the declarations in nvjpeg_api.hpp were written from the
// documentation of nvJPEG 12 and 13, in which every call and value used here appears with
// these signatures; an older library is refused rather than trusted.
inline constexpr version min_version{12, 0, 0};

class library {
 public:
  // GPUFEED_NVJPEG_LIBRARY's file when set, else the default names (see the contracts above).
  [[nodiscard]] static library load() {
    const char* env = std::getenv(library_env);
    if (env && *env) return library(std::vector<std::string>{env}, true);
    return library(std::vector<std::string>{"libnvjpeg.so.13", "libnvjpeg.so"}, false);
  }

  // Tries `candidates` in order; the first that opens is the one judged (a library with a missing
  // symbol is not passed over for the next: what was found is what the user would run).
  explicit library(std::vector<std::string> candidates, bool from_env = false) {
    std::string tried;
    for (const std::string& c : candidates) {
      ::dlerror();
      lib_ = ::dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (lib_) {
        path_ = c;
        break;
      }
      const char* why = ::dlerror();
      tried += (tried.empty() ? "" : "; ") + std::string(why ? why : c + ": dlopen failed");
    }
    if (!lib_) {
      why_not_ = "nvJPEG not found" +
                 (from_env ? std::string(" at ") + library_env + "=" + candidates.front() : "") +
                 " (" + tried + ")";
      return;
    }
    found_ = true;
    std::string missing;
    for_each_symbol(api_, [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(::dlsym(lib_, name));
      if (!fn && missing.empty()) missing = name;
    });
    if (!missing.empty()) {
      refuse(path_ + " has no " + missing + ": not an nvJPEG this gpufeed can use");
      return;
    }
    if (!read_version()) return;
    if (version_ < min_version) {
      refuse("nvJPEG " + version_.text() + " (" + path_ + ") is older than " +
             min_version.text() + ", the oldest this gpufeed can use");
      return;
    }
    ok_ = true;
  }

  library(library&& o) noexcept
      : lib_(std::exchange(o.lib_, nullptr)),
        found_(std::exchange(o.found_, false)),
        ok_(std::exchange(o.ok_, false)),
        path_(std::move(o.path_)),
        why_not_(std::move(o.why_not_)),
        version_(o.version_),
        api_(o.api_) {}
  library& operator=(library&& o) noexcept {
    std::swap(lib_, o.lib_);
    std::swap(found_, o.found_);
    std::swap(ok_, o.ok_);
    std::swap(path_, o.path_);
    std::swap(why_not_, o.why_not_);
    std::swap(version_, o.version_);
    std::swap(api_, o.api_);
    return *this;
  }
  library(const library&) = delete;
  library& operator=(const library&) = delete;
  ~library() = default;  // never dlclose a library that passed (see the contracts)

  // Every symbol resolved and the version accepted: api() may be called.
  [[nodiscard]] bool ok() const noexcept { return ok_; }
  // A file opened (whether or not it then passed).
  [[nodiscard]] bool found() const noexcept { return found_; }
  // One line, empty when ok().
  [[nodiscard]] const std::string& why_not() const noexcept { return why_not_; }
  // The file that opened, as given to dlopen (a name the loader searched for, or a path).
  [[nodiscard]] const std::string& path() const noexcept { return path_; }
  // The library's version; zero when it could not be read.
  [[nodiscard]] const nvjpeg::version& library_version() const noexcept { return version_; }
  // The entry points. Precondition: ok().
  [[nodiscard]] const functions& api() const noexcept { return api_; }

 private:
  bool read_version() {
    int* fields[] = {&version_.major, &version_.minor, &version_.patch};
    const library_property props[] = {library_property::major_version,
                                      library_property::minor_version,
                                      library_property::patch_level};
    const char* names[] = {"MAJOR_VERSION", "MINOR_VERSION", "PATCH_LEVEL"};
    for (int i = 0; i < 3; ++i) {
      const status s = api_.get_property(props[i], fields[i]);
      if (s != status::success) {
        refuse("nvjpegGetProperty(" + std::string(names[i]) + ") returned " +
               status_name(s) + " (" + path_ + ")");
        version_ = {};
        return false;
      }
    }
    return true;
  }

  // Gives up on a library that opened: nothing was created with it, so it is closed again.
  void refuse(std::string why) {
    why_not_ = std::move(why);
    api_ = {};
    ::dlclose(lib_);
    lib_ = nullptr;
  }

  void* lib_ = nullptr;
  bool found_ = false, ok_ = false;
  std::string path_, why_not_;
  nvjpeg::version version_;
  functions api_{};
};

}  // namespace gpufeed::detail::image::nvjpeg
