// Shared by the record transform tests: a sharded in-memory source, and transforms whose every
// output byte can be recomputed from (seed, epoch, record) alone, so a delivered record is
// checked against a reference computed here, independently of the loader.
#pragma once

#include <doctest/doctest.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <span>
#include <vector>

#include "gpufeed/loader.hpp"
#include "gpufeed/record_transform.hpp"
#include "memory_source.hpp"

namespace gpufeed::test {

struct fake_shard {
  std::filesystem::path path;
  std::uint64_t first_record = 0, records = 0;
};

// memory_source with shards of 100 records named shard-<n>.h5, and a count of reads.
class sharded_source : public memory_source {
 public:
  sharded_source(std::uint64_t n, std::size_t fixed, std::size_t max_var = 0)
      : memory_source(n, fixed, max_var) {
    for (std::uint64_t f = 0; f < n; f += 100)
      shards_.push_back({"shard-" + std::to_string(f / 100) + ".h5", f, std::min<std::uint64_t>(100, n - f)});
  }
  [[nodiscard]] const std::vector<fake_shard>& shards() const noexcept { return shards_; }
  void read(std::uint64_t i, std::span<std::byte> dst) const {
    reads.fetch_add(1, std::memory_order_relaxed);
    memory_source::read(i, dst);
  }
  mutable std::atomic<std::uint64_t> reads{0};

 private:
  std::vector<fake_shard> shards_;
};

inline std::string shard_name(std::uint64_t i) { return "shard-" + std::to_string(i / 100) + ".h5"; }

// Output size of record i for the bounded transform: 1..bound, drawn first from its generator.
inline std::size_t bounded_size(record_rng& rng, std::size_t bound) {
  return 1 + static_cast<std::size_t>(rng.below(bound));
}

// The reference output of record `i`: byte j = input[j % input size] ^ a draw of the record's
// generator (one draw per 8 bytes). Bounded: the size comes first, from the same generator.
inline std::vector<std::byte> reference_output(const memory_source& src, std::uint64_t seed,
                                               std::uint64_t epoch, std::uint64_t i,
                                               std::size_t bytes, bool bounded) {
  record_rng rng(seed, epoch, i);
  const std::size_t n = bounded ? bounded_size(rng, bytes) : bytes;
  const std::size_t in = src.record_size(i);
  std::vector<std::byte> out(n);
  std::uint64_t draw = 0;
  for (std::size_t j = 0; j < n; ++j) {
    if (j % 8 == 0) draw = rng();
    out[j] = expected_byte(i, j % in) ^ static_cast<std::byte>(draw >> (8 * (j % 8)));
  }
  return out;
}

// The same computation as a transform (what the loader's workers run). Checks its input too.
inline void transform_into(const record_input& in, std::span<std::byte> out, record_rng& rng,
                           std::size_t n, const memory_source& src) {
  REQUIRE(src.matches(in.index, in.bytes));
  REQUIRE(in.label == src.label(in.index));
  std::uint64_t draw = 0;
  for (std::size_t j = 0; j < n; ++j) {
    if (j % 8 == 0) draw = rng();
    out[j] = in.bytes[j % in.bytes.size()] ^ static_cast<std::byte>(draw >> (8 * (j % 8)));
  }
}

inline record_transform fixed_transform(const memory_source& src, std::size_t bytes) {
  return record_transform::fixed(bytes, [&src](const record_input& in, std::span<std::byte> out,
                                               record_rng& rng) {
    transform_into(in, out, rng, out.size(), src);
  });
}

inline record_transform bounded_transform(const memory_source& src, std::size_t bound) {
  return record_transform::bounded(bound, [&src](const record_input& in, std::span<std::byte> out,
                                                 record_rng& rng) -> std::size_t {
    const std::size_t n = bounded_size(rng, out.size());
    transform_into(in, out, rng, n, src);
    return n;
  });
}

// Per epoch: record index -> its delivered output (each index must come once).
using epoch_outputs = std::map<std::uint64_t, std::vector<std::byte>>;

template <class Loader>
std::vector<epoch_outputs> collect(Loader& l, std::size_t epochs) {
  std::vector<epoch_outputs> out(epochs);
  for (std::size_t e = 0; e < epochs; ++e) {
    for (auto& b : l.epoch()) {
      REQUIRE(b.epoch() == e);
      CHECK(b.offsets()[b.size()] == b.data().size());
      for (std::size_t k = 0; k < b.size(); ++k) {
        const auto r = b.record(k);
        CHECK(out[e].emplace(b.indices()[k], std::vector<std::byte>(r.begin(), r.end())).second);
      }
    }
  }
  return out;
}

}  // namespace gpufeed::test
