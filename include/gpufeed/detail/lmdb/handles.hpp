// gpufeed — move-only owners of LMDB handles (unique_handle, and read_txn) and the mapping of
// LMDB statuses to gpufeed errors.
#pragma once

#include <lmdb.h>

#include <source_location>
#include <string>
#include <utility>

#include "gpufeed/detail/unique_handle.hpp"
#include "gpufeed/error.hpp"

namespace gpufeed::detail::lmdb {

// Throws the gpufeed error that fits LMDB status rc (non-zero), with the API name and
// mdb_strerror's text in the context:
//   MDB_INVALID, MDB_VERSION_MISMATCH, MDB_INCOMPATIBLE  -> format_error (not an LMDB file we can read)
//   MDB_CORRUPTED, MDB_PAGE_NOTFOUND                     -> corrupt_error
//   positive values (errno from the OS)                  -> io_error
//   any other MDB_* status                               -> library_error
[[noreturn]] inline void throw_status(int rc, const char* api, const std::string& message,
                                      error_context ctx,
                                      std::source_location where = std::source_location::current()) {
  ctx.api = api;
  ctx.status = rc;
  ctx.status_text = mdb_strerror(rc);
  ctx.where = where;
  switch (rc) {
    case MDB_INVALID:
    case MDB_VERSION_MISMATCH:
    case MDB_INCOMPATIBLE: throw format_error(message, std::move(ctx));
    case MDB_CORRUPTED:
    case MDB_PAGE_NOTFOUND: throw corrupt_error(message, std::move(ctx));
    default:
      if (rc > 0) throw io_error(message, std::move(ctx));
      throw library_error(message, std::move(ctx));
  }
}

struct env_close {
  void operator()(MDB_env* e) const noexcept { mdb_env_close(e); }
};
// Owns an MDB_env (mdb_env_close). Close it only after every transaction on it has ended.
class env : public unique_handle<MDB_env*, env_close> {  // a class: a using would be shadowed
 public:
  using unique_handle::unique_handle;
};

// Owns a read-only MDB_txn that is begun once and then reset/renewed (docs/design.md, "LMDB open
// flags"): renewing reuses the txn's memory (and, with a lock file, its reader slot) instead of
// allocating again. Not a unique_handle: whether the txn is active moves with it, and commit()
// ends it without the abort the destructor would do.
class read_txn {
 public:
  read_txn() noexcept = default;
  read_txn(read_txn&& other) noexcept
      : txn_(std::exchange(other.txn_, nullptr)), active_(std::exchange(other.active_, false)) {}
  read_txn& operator=(read_txn&& other) noexcept {
    std::swap(txn_, other.txn_);
    std::swap(active_, other.active_);
    return *this;
  }
  read_txn(const read_txn&) = delete;
  read_txn& operator=(const read_txn&) = delete;
  ~read_txn() { discard(); }

  // Makes the txn usable on e (begin the first time, renew after a reset). Returns the LMDB
  // status; on failure the txn is discarded so the next call starts afresh.
  [[nodiscard]] int activate(MDB_env* e) noexcept {
    if (active_) return MDB_SUCCESS;
    const int rc = txn_ ? mdb_txn_renew(txn_) : mdb_txn_begin(e, nullptr, MDB_RDONLY, &txn_);
    if (rc != MDB_SUCCESS) {
      discard();
      return rc;
    }
    active_ = true;
    return rc;
  }
  // Releases the snapshot (mdb_txn_reset); keeps the txn for a later activate().
  void reset() noexcept {
    if (active_) mdb_txn_reset(txn_);
    active_ = false;
  }
  // Commits (ends) the txn: makes handles opened in it, such as a dbi, permanent. Returns the
  // LMDB status; the txn is gone either way.
  [[nodiscard]] int commit() noexcept {
    const int rc = txn_ ? mdb_txn_commit(txn_) : MDB_BAD_TXN;
    txn_ = nullptr;
    active_ = false;
    return rc;
  }
  // Ends the txn for good (mdb_txn_abort), e.g. after an error left it unusable.
  void discard() noexcept {
    if (txn_) mdb_txn_abort(txn_);
    txn_ = nullptr;
    active_ = false;
  }
  [[nodiscard]] MDB_txn* get() const noexcept { return txn_; }
  [[nodiscard]] bool active() const noexcept { return active_; }

 private:
  MDB_txn* txn_ = nullptr;
  bool active_ = false;
};

struct cursor_close {
  void operator()(MDB_cursor* c) const noexcept { mdb_cursor_close(c); }
};
// Owns an MDB_cursor (mdb_cursor_close); used only while scanning a shard at open.
class cursor : public unique_handle<MDB_cursor*, cursor_close> {
 public:
  using unique_handle::unique_handle;
};

}  // namespace gpufeed::detail::lmdb
