// The MPI plugin (libddp_train_mpi.so): ddp::comm over MPI_COMM_WORLD. Built as a module that
// ddp_train loads with dlopen (comm.cpp), so only this file links libmpi.
#include <mpi.h>

#include <cstdlib>
#include <stdexcept>
#include <string>

#include "comm.hpp"

namespace {

void check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  throw std::runtime_error(std::string(what) + ": " + std::string(msg, static_cast<std::size_t>(len)));
}

class mpi_comm final : public ddp::comm {
 public:
  mpi_comm() {
    check(MPI_Comm_rank(MPI_COMM_WORLD, &rank_), "MPI_Comm_rank");
    check(MPI_Comm_size(MPI_COMM_WORLD, &world_), "MPI_Comm_size");
    // The processes sharing this host's memory: the local rank picks the GPU.
    check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node_),
          "MPI_Comm_split_type");
    check(MPI_Comm_rank(node_, &local_), "MPI_Comm_rank(node)");
    char v[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(v, &len);
    version_.assign(v, static_cast<std::size_t>(len));
    if (auto nl = version_.find_first_of(",\n"); nl != std::string::npos) version_.resize(nl);
  }
  ~mpi_comm() override {
    MPI_Comm_free(&node_);
    MPI_Finalize();
  }
  int rank() const noexcept override { return rank_; }
  int world() const noexcept override { return world_; }
  int local_rank() const noexcept override { return local_; }
  std::string describe() const override { return "MPI (" + version_ + ")"; }
  [[noreturn]] void abort(int code) noexcept override {
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);
  }
  void barrier() override { check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier"); }
  void broadcast(void* data, std::size_t bytes, int root) override {
    check(MPI_Bcast(data, count(bytes), MPI_BYTE, root, MPI_COMM_WORLD), "MPI_Bcast");
  }
  std::vector<std::vector<std::byte>> all_gather(std::span<const std::byte> mine) override {
    const int n = count(mine.size());
    std::vector<int> sizes(static_cast<std::size_t>(world_));
    check(MPI_Allgather(&n, 1, MPI_INT, sizes.data(), 1, MPI_INT, MPI_COMM_WORLD), "MPI_Allgather");
    std::vector<int> displs(sizes.size());
    long long total = 0;
    for (std::size_t r = 0; r < sizes.size(); ++r) {
      displs[r] = static_cast<int>(total);
      total += sizes[r];
    }
    if (total > 0x7fffffff) throw std::runtime_error("all_gather: more than 2 GiB in all");
    std::vector<std::byte> all(static_cast<std::size_t>(total));
    check(MPI_Allgatherv(mine.data(), n, MPI_BYTE, all.data(), sizes.data(), displs.data(), MPI_BYTE,
                         MPI_COMM_WORLD),
          "MPI_Allgatherv");
    std::vector<std::vector<std::byte>> out(sizes.size());
    for (std::size_t r = 0; r < sizes.size(); ++r)
      out[r].assign(all.begin() + displs[r], all.begin() + displs[r] + sizes[r]);
    return out;
  }

 private:
  static int count(std::size_t bytes) {
    if (bytes > 0x7fffffff) throw std::runtime_error("MPI message over 2 GiB");
    return static_cast<int>(bytes);
  }
  int rank_ = 0, world_ = 1, local_ = 0;
  MPI_Comm node_ = MPI_COMM_NULL;
  std::string version_;
};

}  // namespace

extern "C" __attribute__((visibility("default"))) ddp::comm* ddp_train_mpi_open(int* argc, char*** argv,
                                                                                std::string* error) {
  try {
    int provided = 0;
    // FUNNELED: only the main thread calls MPI (the loader's workers never do).
    check(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
    return new mpi_comm();
  } catch (const std::exception& e) {
    if (error) *error = e.what();
    return nullptr;
  }
}
