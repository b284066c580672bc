// gpufeed — turning a SIGBUS raised by a read from a shard's map into an error of that read.
//
// Why: LMDB reads through a shared mapping of data.mdb, and io::mapped_file (mapped_file.hpp)
// reads HDF5 shards through one. When the file is truncated while it is mapped (by another
// process: a copy that is being replaced, a shrinking network file), touching a page past the
// new end raises SIGBUS, which kills the process. Checking the size first cannot
// close the race (the file may shrink between the check and the access), so a read that touches
// the map runs inside guard_map_reads(): a SIGBUS on that thread whose address lies inside that
// map jumps back to the guard (siglongjmp), which reports it as a fault; the caller throws an
// io_error naming file and record.
//
// The handler, and why it is safe:
//  - It is installed once per process (the first guarded read), for SIGBUS only, with SA_SIGINFO
//    and SA_NODEFER (so jumping out leaves the signal unblocked: sigsetjmp need not save the
//    mask, which would cost a system call per read). The previous action is kept.
//  - Thread-safe: the armed state is per thread (thread_local). A guard is armed only around
//    mdb_get and the copy out of the map on its own thread; the handler runs on the thread that
//    faulted (SIGBUS from a memory access is delivered synchronously to it), so it only reads
//    that thread's slot. The slot is touched before it is armed, so the handler's access to it
//    never allocates thread-local storage.
//  - Jumping out is sound there: the guarded code holds no lock and allocates nothing (mdb_get
//    on a read-only transaction keeps its cursor on the stack; the copy is memcpy or the Datum
//    gather, whose frames own no resources), and the caller ends the transaction (mdb_txn_abort)
//    before the error is thrown. mapped_file's guarded code is memcpy alone.
//  - Every other SIGBUS (another thread, an address outside the armed map, a signal sent with
//    kill) goes to the previous handler; when that was the default action (or "ignore", which
//    the kernel cannot honour for a fault), the default is restored and the fault recurs, so the
//    process dies exactly as it would have without gpufeed.
//  - A program that installs its own SIGBUS handler after opening a shard replaces this one: its
//    faults are then its own (truncation during reading kills the process again).
#pragma once

#include <setjmp.h>
#include <signal.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace gpufeed::detail::io {

// False in ThreadSanitizer builds, whose signal interception does not run the handler in time
// (the process dies of the fault): there a map of a file that may shrink is not guarded, and
// callers that can read otherwise (hdf5_options::reads automatic) do.
#if defined(__SANITIZE_THREAD__)
inline constexpr bool map_faults_guarded = false;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
inline constexpr bool map_faults_guarded = false;
#else
inline constexpr bool map_faults_guarded = true;
#endif
#else
inline constexpr bool map_faults_guarded = true;
#endif

struct fault_slot {
  sigjmp_buf* jump = nullptr;           // armed while non-null
  std::uintptr_t lo = 0, hi = 0;        // addresses the guard covers: [lo, hi)
  const void* volatile addr = nullptr;  // the faulting address, set by the handler
};

inline thread_local fault_slot this_thread_fault_slot;

inline struct sigaction& previous_sigbus_action() {
  static struct sigaction a {};
  return a;
}

inline void on_sigbus(int sig, siginfo_t* info, void* context) {
  fault_slot& slot = this_thread_fault_slot;
  const auto a = reinterpret_cast<std::uintptr_t>(info ? info->si_addr : nullptr);
  if (slot.jump && info && info->si_code > 0 && a >= slot.lo && a < slot.hi) {
    slot.addr = info->si_addr;
    sigjmp_buf* j = slot.jump;
    slot.jump = nullptr;
    siglongjmp(*j, 1);
  }
  const struct sigaction& prev = previous_sigbus_action();
  if ((prev.sa_flags & SA_SIGINFO) && prev.sa_sigaction) {
    prev.sa_sigaction(sig, info, context);
    return;
  }
  if (!(prev.sa_flags & SA_SIGINFO) && prev.sa_handler != SIG_DFL && prev.sa_handler != SIG_IGN) {
    prev.sa_handler(sig);
    return;
  }
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(SIGBUS, &dfl, nullptr);
  if (!info || info->si_code <= 0) raise(sig);  // sent, not a fault: returning would not recur
}

inline bool install_sigbus_handler() noexcept {
  struct sigaction ours {};
  ours.sa_sigaction = &on_sigbus;
  ours.sa_flags = SA_SIGINFO | SA_NODEFER;
  sigemptyset(&ours.sa_mask);
  if (sigaction(SIGBUS, nullptr, &previous_sigbus_action()) != 0) return false;
  return sigaction(SIGBUS, &ours, nullptr) == 0;
}

// Runs body() (which must own no resources in frames a jump would skip, see above) with SIGBUS
// at addresses in [base, base + size) turned into a return: the faulting address, or null when
// body() completed. base == nullptr covers every address (the map's place is unknown).
// Exceptions from body() propagate (the guard is disarmed first).
template <class Body>
[[nodiscard]] const void* guard_map_reads(const void* base, std::size_t size, Body&& body) {
  static const bool installed = install_sigbus_handler();
  (void)installed;
  fault_slot& slot = this_thread_fault_slot;
  sigjmp_buf jump;
  if (sigsetjmp(jump, 0) != 0) {
    std::atomic_signal_fence(std::memory_order_seq_cst);
    return slot.addr ? slot.addr : base;
  }
  slot.lo = base ? reinterpret_cast<std::uintptr_t>(base) : 0;
  slot.hi = base ? slot.lo + size : ~std::uintptr_t{0};
  slot.addr = nullptr;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  slot.jump = &jump;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  try {
    body();
  } catch (...) {
    slot.jump = nullptr;
    throw;
  }
  std::atomic_signal_fence(std::memory_order_seq_cst);
  slot.jump = nullptr;
  return nullptr;
}

}  // namespace gpufeed::detail::io
