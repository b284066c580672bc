// open_comm(): the MPI plugin through dlopen, or one process alone.
#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include "comm.hpp"

namespace ddp {
namespace {

class self_comm final : public comm {
 public:
  int rank() const noexcept override { return 0; }
  int world() const noexcept override { return 1; }
  int local_rank() const noexcept override { return 0; }
  std::string describe() const override { return "one process (no MPI)"; }
  void barrier() override {}
  [[noreturn]] void abort(int code) noexcept override { std::_Exit(code); }
  void broadcast(void*, std::size_t, int) override {}
  std::vector<std::vector<std::byte>> all_gather(std::span<const std::byte> mine) override {
    return {std::vector<std::byte>(mine.begin(), mine.end())};
  }
};

// A launcher variable that says this process is one of several.
bool launched_as_several() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"}) {
    const char* s = std::getenv(v);
    if (s && std::atol(s) > 1) return true;
  }
  return false;
}

// The plugin beside the executable (its directory from /proc/self/exe), else the loader's path.
std::string plugin_path() {
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const auto p = exe.parent_path() / "libddp_train_mpi.so";
    if (std::filesystem::exists(p, ec)) return p.string();
  }
  return "libddp_train_mpi.so";
}

}  // namespace

std::unique_ptr<comm> open_comm(comm_kind kind, int* argc, char*** argv, std::string* why) {
  if (kind == comm_kind::self) {
    if (why) *why = "--comm self";
    return std::make_unique<self_comm>();
  }
  const std::string path = plugin_path();
  // RTLD_GLOBAL: Open MPI's own components are dlopened later and need libmpi's symbols.
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
  std::string error;
  if (!h) {
    const char* e = dlerror();
    error = "cannot load " + path + ": " + (e ? e : "unknown error");
  } else if (auto* open = reinterpret_cast<decltype(&ddp_train_mpi_open)>(
                 dlsym(h, "ddp_train_mpi_open"))) {
    // The plugin stays loaded until exit: MPI_Finalize runs from the comm's destructor.
    if (comm* c = open(argc, argv, &error)) {
      if (why) *why = "MPI through " + path;
      return std::unique_ptr<comm>(c);
    }
  } else {
    error = path + " has no ddp_train_mpi_open";
  }
  if (kind == comm_kind::mpi || launched_as_several())
    throw std::runtime_error("MPI is needed (" +
                             std::string(kind == comm_kind::mpi ? "--comm mpi"
                                                                : "a launcher started several processes") +
                             ") but " + error);
  if (why) *why = error + "; running as one process";
  return std::make_unique<self_comm>();
}

}  // namespace ddp
