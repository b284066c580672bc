// gpufeed — reading records of a catalog: per-thread transaction sets and a pool of them.
#pragma once

#include <lmdb.h>
#include <sys/stat.h>

#include <cerrno>
#include <optional>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "gpufeed/datum.hpp"
#include "gpufeed/detail/io/map_fault_guard.hpp"
#include "gpufeed/detail/lmdb/catalog.hpp"
#include "gpufeed/detail/lmdb/handles.hpp"
#include "gpufeed/error.hpp"

namespace gpufeed::detail::lmdb {

// Throws config_error unless i is a record of c.
inline void check_index(const catalog& c, std::uint64_t i) {
  if (i >= c.size()) {
    error_context ctx;
    ctx.record = i;
    throw config_error("record index " + std::to_string(i) + " is out of range: the LMDB source has " +
                           std::to_string(c.size()) + " records",
                       std::move(ctx));
  }
}

// The read transactions one thread uses: one per shard, begun on first use, reset by idle() and
// renewed on the next read. With bounded environments (catalog::bounded()) one shard at a time:
// the set pins the shard it reads, and ends its transaction and unpins it when it moves to
// another shard or idles, so a closed environment never has a live transaction and each
// reading thread holds at most one pin. Not thread-safe; moving it is cheap.
class txn_set {
 public:
  txn_set() noexcept = default;
  txn_set(txn_set&& o) noexcept
      : txns_(std::move(o.txns_)), active_(std::move(o.active_)),
        pinned_(std::exchange(o.pinned_, nullptr)), held_(o.held_) {}
  txn_set& operator=(txn_set&& o) noexcept {
    std::swap(txns_, o.txns_);
    std::swap(active_, o.active_);
    std::swap(pinned_, o.pinned_);
    std::swap(held_, o.held_);
    return *this;
  }
  txn_set(const txn_set&) = delete;
  txn_set& operator=(const txn_set&) = delete;
  ~txn_set() { release(); }

  // Whether a shard is pinned now (bounded environments only).
  [[nodiscard]] bool holds_pin() const noexcept { return pinned_ != nullptr; }

  // Throws io_error when s's data file is now shorter than at open (LMDB never shrinks it: the
  // file was truncated by someone else, and reading pages past its end would fault).
  static void check_not_shrunk(const shard_table& t, std::uint64_t i) {
    const shard& s = t.s;
    struct stat st {};
    if (::fstat(s.fd, &st) != 0)
      throw_status(errno, "fstat", "cannot stat the LMDB data file", record_context(s, i));
    if (static_cast<std::uint64_t>(st.st_size) < s.file_size)
      throw io_error("data.mdb was truncated while open: it had " + std::to_string(s.file_size) +
                         " bytes, now " + std::to_string(st.st_size) + t.key_note(i - t.first),
                     record_context(s, i));
  }
  static std::string file_size_text(const shard& s) {
    struct stat st {};
    if (::fstat(s.fd, &st) != 0) return "an unknown size";
    return std::to_string(st.st_size) + " bytes, " + std::to_string(s.file_size) + " at open";
  }

  // Opens the record's shard on first use (its open error, naming it, is thrown here).
  void read(const catalog& c, std::uint64_t i, std::span<std::byte> dst) {
    check_index(c, i);
    const std::size_t si = c.shard_of(i);
    const shard_table& tab = c.table(si);
    const std::uint64_t local = i - tab.first;
    const record_entry& e = tab.entry(local);
    const std::size_t n = e.payload_size;
    const shard& s = tab.s;
    if (dst.size() < n)
      throw config_error("destination of " + std::to_string(dst.size()) +
                             " bytes is smaller than the record's " + std::to_string(n) + " bytes" +
                             tab.key_note(local),
                         record_context(s, i));
    if (txns_.size() != c.shard_count()) txns_.resize(c.shard_count());
    if (c.bounded() && (pinned_ != &c || held_ != si)) {
      release();
      c.pin(si);  // reopens a closed environment (its errors name the shard)
      pinned_ = &c;
      held_ = si;
    }
    read_txn& t = txns_[si];
    if (!t.active()) {
      const char* api = t.get() ? "mdb_txn_renew" : "mdb_txn_begin";
      check_not_shrunk(tab, i);  // at batch boundaries: a clear message before any fault
      if (int rc = t.activate(s.handle.get()); rc != MDB_SUCCESS)
        throw_status(rc, api, "cannot start a read transaction", record_context(s, i));
      active_.push_back(static_cast<std::uint32_t>(si));
    }
    const std::span<const std::byte> k = tab.key(e);
    MDB_val key{k.size(), const_cast<std::byte*>(k.data())};  // mdb_get does not write the key
    MDB_val val{};
    int rc = MDB_SUCCESS;
    const char* overflow_bad = nullptr;
    enum class outcome { copied, get_failed, size_changed, bad_overflow, gather_short } out{};
    // A Datum gather names the record in its format errors: built before the guard (no frame a
    // jump could skip may own memory).
    std::optional<error_context> gather_ctx;
    if (e.payload_offset == gathered) gather_ctx.emplace(record_context(s, i));
    // Everything that touches the map runs in the guard (io/map_fault_guard.hpp) and only sets
    // these trivial locals; errors are thrown after it.
    const void* fault = io::guard_map_reads(s.valid.base, s.map_size, [&] {
      rc = mdb_get(t.get(), s.dbi, &key, &val);
      if (rc != MDB_SUCCESS) {
        out = outcome::get_failed;
        return;
      }
      if (val.mv_size != e.value_size || !s.valid.contains(val.mv_data, val.mv_size)) {
        out = outcome::size_changed;
        return;
      }
      overflow_bad = check_overflow_value(s, val);
      if (overflow_bad) {
        out = outcome::bad_overflow;
        return;
      }
      const auto* v = static_cast<const std::byte*>(val.mv_data);
      if (n == 0) return;
      if (e.payload_offset != gathered)  // raw values: offset 0
        std::memcpy(dst.data(), v + e.payload_offset, n);
      else if (datum::gather_floats({v, val.mv_size}, dst.first(n), *gather_ctx) != n)
        out = outcome::gather_short;
    });
    if (fault) {
      t.discard();  // the snapshot may point past the file's end now; begin afresh next time
      throw io_error(
          "data.mdb was truncated while being read: reading the record touched byte " +
              std::to_string(reinterpret_cast<std::uintptr_t>(fault) -
                             reinterpret_cast<std::uintptr_t>(s.valid.base)) +
              " of the map, past the file's end (SIGBUS caught; the file now has " +
              file_size_text(s) + ")" + tab.key_note(local),
          record_context(s, i));
    }
    switch (out) {
      case outcome::copied: return;
      case outcome::get_failed:
        t.discard();  // an error may leave the txn unusable (MDB_TXN_ERROR); begin afresh
        if (rc == MDB_NOTFOUND)
          throw corrupt_error("the record's key is no longer in the database" + tab.key_note(local),
                              record_context(s, i));
        throw_status(rc, "mdb_get", "cannot read the record" + tab.key_note(local),
                     record_context(s, i));
      case outcome::size_changed:
        throw corrupt_error("the record's value has " + std::to_string(val.mv_size) +
                                " bytes, but had " + std::to_string(e.value_size) +
                                " when the shard was opened" + tab.key_note(local),
                            record_context(s, i));
      case outcome::bad_overflow:
        throw corrupt_error(std::string("damaged LMDB overflow page: ") + overflow_bad +
                                tab.key_note(local),
                            record_context(s, i));
      case outcome::gather_short:
        throw corrupt_error("the Datum's float_data changed since the shard was opened" +
                                tab.key_note(local),
                            record_context(s, i));
    }
  }

  // Releases every snapshot this set holds (mdb_txn_reset); the txns are renewed on next use.
  // A pinned shard's txn is ended and the shard unpinned.
  void idle() noexcept {
    for (std::uint32_t si : active_) txns_[si].reset();
    active_.clear();
    release();
  }

 private:
  // Ends the pinned shard's txn (its environment may close once unpinned) and unpins it.
  void release() noexcept {
    if (!pinned_) return;
    if (held_ < txns_.size()) txns_[held_].discard();
    active_.clear();  // only the pinned shard's txn was active
    pinned_->unpin(held_);
    pinned_ = nullptr;
  }

  std::vector<read_txn> txns_;         // indexed by shard
  std::vector<std::uint32_t> active_;  // shards whose txn holds a snapshot (may repeat)
  const catalog* pinned_ = nullptr;    // the catalog whose shard held_ this set pins, if any
  std::size_t held_ = 0;
};

// Transaction sets for the thread-safe lmdb_source::read(): a caller takes one (or a fresh one),
// reads, and gives it back. Sets of mutable shards are reset before they go back, so no
// snapshot outlives the call.
class txn_pool {
 public:
  txn_set take() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (free_.empty()) return {};
    txn_set t = std::move(free_.back());
    free_.pop_back();
    return t;
  }
  // A set that pins a shard (bounded environments) is idled too: no pin outlives the call.
  void give(txn_set&& t, bool keep_snapshot) noexcept {
    if (!keep_snapshot || t.holds_pin()) t.idle();
    try {
      std::lock_guard<std::mutex> lock(mutex_);
      free_.push_back(std::move(t));
    } catch (...) {  // no memory to keep it: drop it (its txns end in its destructor)
    }
  }

 private:
  std::mutex mutex_;
  std::vector<txn_set> free_;
};

}  // namespace gpufeed::detail::lmdb
