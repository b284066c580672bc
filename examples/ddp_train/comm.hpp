// ddp_train's process group: rank, world size, local rank and the few collectives the program
// needs (barrier, broadcast, all-gather). Two implementations:
//   - MPI (comm_mpi.cpp), built as a plugin (libddp_train_mpi.so beside the executable) that
//     open_comm() loads with dlopen, so ddp_train itself does not link libmpi: a machine with no
//     MPI (the GPU machine) still runs it as one process;
//   - one process alone (world 1), used when the plugin or libmpi cannot be loaded and no
//     launcher environment says there should be more than one process.
// Every collective must be called by every rank in the same order (as in MPI).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace ddp {

class comm {
 public:
  virtual ~comm() = default;
  [[nodiscard]] virtual int rank() const noexcept = 0;
  [[nodiscard]] virtual int world() const noexcept = 0;
  // This process's index among the processes on its host (the GPU it drives).
  [[nodiscard]] virtual int local_rank() const noexcept = 0;
  [[nodiscard]] virtual std::string describe() const = 0;
  virtual void barrier() = 0;
  // Ends every rank's process (MPI_Abort): a rank that failed alone would leave the others
  // waiting in a collective.
  [[noreturn]] virtual void abort(int code) noexcept = 0;
  // root's `bytes` to every rank.
  virtual void broadcast(void* data, std::size_t bytes, int root) = 0;
  // Every rank's `mine` (lengths may differ), indexed by rank, on every rank.
  [[nodiscard]] virtual std::vector<std::vector<std::byte>> all_gather(
      std::span<const std::byte> mine) = 0;
};

enum class comm_kind { automatic, mpi, self };

// automatic: MPI when the plugin and libmpi load (under a launcher, or as an MPI singleton
// without one); one process alone when they do not and no launcher variable (OMPI_COMM_WORLD_SIZE,
// PMI_SIZE or SLURM_NTASKS above 1) is set. mpi: MPI or an error. self: never MPI.
// `why` receives how the choice was made. Throws std::runtime_error when MPI is required (kind
// mpi, or a launcher started several processes) but cannot be loaded.
std::unique_ptr<comm> open_comm(comm_kind kind, int* argc, char*** argv, std::string* why);

// Sums `data` element-wise over the ranks in rank order 0, 1, ..., world-1 (an all-gather, then
// the same additions on every rank), so every rank ends with bitwise the same values: an
// MPI_Allreduce may combine in an order of its choosing that differs between ranks.
template <class T>
void all_reduce_sum_ordered(comm& c, std::span<T> data) {
  const auto parts = c.all_gather(std::as_bytes(std::span<const T>(data)));
  for (std::size_t i = 0; i < data.size(); ++i) {
    T s{};
    for (const auto& p : parts) s += reinterpret_cast<const T*>(p.data())[i];
    data[i] = s;
  }
}

// Gathers a vector of trivially copyable values from every rank.
template <class T>
std::vector<std::vector<T>> all_gather_values(comm& c, std::span<const T> mine) {
  const auto parts = c.all_gather(std::as_bytes(mine));
  std::vector<std::vector<T>> out(parts.size());
  for (std::size_t r = 0; r < parts.size(); ++r) {
    out[r].resize(parts[r].size() / sizeof(T));
    if (!out[r].empty()) std::memcpy(out[r].data(), parts[r].data(), parts[r].size());
  }
  return out;
}

}  // namespace ddp

// The plugin's entry point (C linkage, found with dlsym): an MPI comm after MPI_Init_thread, or
// nullptr with *error set. The returned comm calls MPI_Finalize when destroyed.
extern "C" ddp::comm* ddp_train_mpi_open(int* argc, char*** argv, std::string* error);
