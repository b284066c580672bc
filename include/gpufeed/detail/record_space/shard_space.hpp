// gpufeed::detail::record_space — the shards of one source as one record space, whatever their
// format: each shard's path, what is known of it before it is opened (its extent: a record count
// and the sizes the format needs, from pack's manifest or a read at construction), its entry in
// pack's manifest beside the shards, its opened state once opened, and the global numbering of
// their records (shard_offsets.hpp).
//
// Opening (open()) is lazy and thread-safe (lazy_slot.hpp): one caller opens, the others wait;
// an open that throws gives its typed error, naming the shard, to every caller until an open
// succeeds. Descriptors are bounded (detail/shard_lru.hpp): an opened shard is adopted by the
// LRU, which closes and reopens its descriptors through the source's callbacks, keeping the
// opened state. file_of() names a record's shard without opening it.
//
// Opened is the format's opened shard (an HDF5 index, an LMDB record table); Extent what is
// known before opening (a `records` member, the record count, at least).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gpufeed/detail/pack_manifest.hpp"
#include "gpufeed/detail/record_space/lazy_slot.hpp"
#include "gpufeed/detail/record_space/shard_offsets.hpp"
#include "gpufeed/detail/shard_lru.hpp"

namespace gpufeed::detail::record_space {

template <class Opened, class Extent>
class shard_space {
 public:
  // One shard: what is known before it is opened, and its opened state once it is.
  struct slot {
    std::filesystem::path path;
    Extent expected;
    lazy_slot<Opened> opened;
    const manifest_entry* listed = nullptr;  // its entry in pack's manifest beside it, if any
  };

  // The LRU's callbacks: reopen(o) reopens opened shard o's descriptors (may throw), close(o)
  // closes them, keeping o.
  using reopen_fn = std::function<void(const Opened&)>;
  using close_fn = std::function<void(const Opened&)>;

  // Shards at `paths` (their extents still unknown), at most max_open holding descriptors
  // (0: no bound).
  shard_space(const std::vector<std::filesystem::path>& paths, std::size_t max_open,
              reopen_fn reopen, close_fn close)
      : live_(paths.size(), nullptr) {
    slots_.reserve(paths.size());
    for (const auto& p : paths) {
      slots_.push_back(std::make_unique<slot>());
      slots_.back()->path = p;
    }
    lru_ = std::make_unique<shard_lru>(
        paths.size(), max_open, [this, r = std::move(reopen)](std::size_t k) { r(*live_[k]); },
        [this, c = std::move(close)](std::size_t k) noexcept { c(*live_[k]); });
  }
  shard_space(const shard_space&) = delete;
  shard_space& operator=(const shard_space&) = delete;

  [[nodiscard]] std::size_t shard_count() const noexcept { return slots_.size(); }
  [[nodiscard]] slot& at(std::size_t k) noexcept { return *slots_[k]; }
  [[nodiscard]] const slot& at(std::size_t k) const noexcept { return *slots_[k]; }
  [[nodiscard]] const std::filesystem::path& path(std::size_t k) const noexcept {
    return slots_[k]->path;
  }

  // Pack's manifest beside the first shard, kept when `accept(manifest)` (its format is this
  // source's): each shard listed in it gets its entry.
  template <class Accept>
  void find_manifest(Accept&& accept) {
    std::vector<std::filesystem::path> paths;
    for (const auto& sl : slots_) paths.push_back(sl->path);
    listed_ = find_listed(paths);
    if (listed_ && accept(listed_->manifest))
      for (std::size_t k = 0; k < slots_.size(); ++k) slots_[k]->listed = listed_->entries[k];
  }
  [[nodiscard]] const std::optional<listed_shards>& listed() const noexcept { return listed_; }

  // Where the extents came from ("opened", "the manifest <path>", ...), for the errors of a
  // shard that no longer matches them.
  [[nodiscard]] const std::string& extents_from() const noexcept { return extents_from_; }
  void set_extents_from(std::string from) { extents_from_ = std::move(from); }

  // Numbers the records once every shard's extent is known.
  void number_records() {
    for (const auto& sl : slots_) offsets_.add_shard(sl->expected.records);
  }
  [[nodiscard]] const shard_offsets& offsets() const noexcept { return offsets_; }
  [[nodiscard]] std::uint64_t size() const noexcept { return offsets_.size(); }
  [[nodiscard]] std::uint64_t first(std::size_t k) const noexcept { return offsets_.first(k); }
  // Record i's shard and index there; i < size() (callers check, with their own error).
  [[nodiscard]] shard_place locate(std::uint64_t i) const noexcept { return offsets_.locate(i); }
  // The path of the shard holding record i (i < size()), for errors: never opens the shard.
  [[nodiscard]] const std::filesystem::path& file_of(std::uint64_t i) const noexcept {
    return slots_[offsets_.locate(i).shard]->path;
  }
  template <class Fn>
  void for_each_shard_part(std::uint64_t first, std::uint64_t count, Fn&& fn) const {
    offsets_.for_each_shard_part(first, count, std::forward<Fn>(fn));
  }

  // Shard k opened, on first use: open() makes it (std::unique_ptr<Opened>; with a descriptor
  // bound, after making room, and retried once after closing the unpinned shards),
  // check(Opened&) checks it against what was known (throwing leaves it unopened), then the LRU
  // adopts it. Thread-safe; errors as the contract above.
  template <class Open, class Check>
  const Opened& open(std::size_t k, Open&& open, Check&& check) const {
    return slots_[k]->opened.get(
        [&] {
          auto o = lru_->open_first(open);
          check(*o);
          adopt(k, *o);
          return o;
        },
        opens_);
  }
  [[nodiscard]] bool is_open(std::size_t k) const noexcept { return slots_[k]->opened.is_open(); }
  [[nodiscard]] const Opened* if_open(std::size_t k) const noexcept {
    return slots_[k]->opened.if_open();
  }

  // At construction, before the space is shared: shard k, opened by the source, has its
  // descriptors counted by the LRU (adopt), then is published (publish) and counted as opened.
  void adopt(std::size_t k, const Opened& o) const {
    live_[k] = &o;
    lru_->adopt(k);
  }
  void publish(std::size_t k, std::unique_ptr<Opened> o) {
    slots_[k]->opened.set(std::move(o));
    opens_.fetch_add(1, std::memory_order_relaxed);
  }

  [[nodiscard]] std::size_t opens() const noexcept {
    return opens_.load(std::memory_order_relaxed);
  }
  [[nodiscard]] shard_lru& lru() const noexcept { return *lru_; }

 private:
  std::vector<std::unique_ptr<slot>> slots_;
  shard_offsets offsets_;
  std::optional<listed_shards> listed_;  // pack's manifest beside the shards, if any
  std::string extents_from_;
  mutable std::atomic<std::size_t> opens_{0};  // shards opened so far
  // Opened shards, by shard, for the LRU's callbacks: set before a shard is adopted, read only
  // under the LRU's lock.
  mutable std::vector<const Opened*> live_;
  std::unique_ptr<shard_lru> lru_;  // bounds the shards holding descriptors
};

}  // namespace gpufeed::detail::record_space
