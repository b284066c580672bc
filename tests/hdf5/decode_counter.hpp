// Counts chunk decodes per (file, chunk address) while alive, through the record reader's
// observation point (detail::hdf5::chunk_decode_observer). One at a time per process.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "gpufeed/hdf5_source.hpp"

namespace gpufeed::test {

class decode_counter {
 public:
  using counts = std::map<std::pair<std::string, std::uint64_t>, unsigned>;
  // Starts from no counts: decodes counted after an earlier counter's last take() (a loader's
  // decode-ahead finishing before its end) are not this counter's.
  decode_counter() {
    (void)take();
    detail::hdf5::chunk_decode_observer.store(&observe);
  }
  ~decode_counter() { detail::hdf5::chunk_decode_observer.store(nullptr); }
  decode_counter(const decode_counter&) = delete;
  decode_counter& operator=(const decode_counter&) = delete;

  // The counts since the last take(), cleared.
  static counts take() {
    std::lock_guard lock(mutex_);
    return std::exchange(counts_, {});
  }

 private:
  static void observe(const detail::hdf5::shard_index& s,
                      const detail::hdf5::chunk_entry& c) noexcept {
    std::lock_guard lock(mutex_);
    ++counts_[{s.path, c.address}];
  }
  static inline std::mutex mutex_;
  static inline counts counts_;
};

}  // namespace gpufeed::test
