// Test side of the fault-injection shim (fault_shim.c): finds its control functions with dlsym,
// so a test fails loudly when it runs without LD_PRELOAD instead of passing without faults.
#pragma once

#include <dlfcn.h>

#include <stdexcept>
#include <string>

namespace gpufeed::test {

class fault_control {
 public:
  fault_control()
      : configure_(reinterpret_cast<configure_fn>(dlsym(RTLD_DEFAULT, "gpufeed_fault_configure"))),
        injected_(reinterpret_cast<injected_fn>(dlsym(RTLD_DEFAULT, "gpufeed_fault_injected"))) {
    if (!configure_ || !injected_)
      throw std::runtime_error("the fault shim is not loaded (run with LD_PRELOAD=libgpufeed_fault_shim.so)");
  }
  // Tracks descriptors opened on `path` from now on, injecting nothing yet.
  void watch(const std::string& path) const { configure_(path.c_str(), "off", 0, 0); }
  // Faults reads of the watched file: `mode` (eio, short, eof, eintr) at read number `after`
  // (counted from this call) and then every `every`-th read (0: once).
  void arm(const std::string& path, const char* mode, long after, long every = 0) const {
    configure_(path.c_str(), mode, after, every);
  }
  void disarm() const { configure_("", "off", 0, 0); }
  [[nodiscard]] long injected() const { return injected_(); }

 private:
  using configure_fn = void (*)(const char*, const char*, long, long);
  using injected_fn = long (*)();
  configure_fn configure_;
  injected_fn injected_;
};

}  // namespace gpufeed::test
