// gpufeed — where a record's bytes lie in a chunked dataset.
//
// A record is a box of the dataset: row i of a fixed dataset is start (i, 0, ..., 0), count
// (1, d1, ..., dk); blob record i is start offsets[i], count offsets[i+1] - offsets[i] of the 1-D
// byte dataset. Chunks form a regular grid; each is stored row-major at its full chunk shape,
// edge chunks included. The part of a record inside one chunk is copied as "runs": the longest
// stretches contiguous both in the chunk and in the record (row-major, packed).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace gpufeed::detail::hdf5 {

inline constexpr int max_rank = 32;  // H5S_MAX_RANK
using coords = std::array<std::uint64_t, max_rank>;

struct record_box {
  coords start{};
  coords count{};
};

struct chunk_grid {
  int rank = 0;
  std::size_t element_size = 0;
  coords dims{};          // dataset extent
  coords chunk{};         // chunk shape
  coords grid{};          // chunks per dimension: ceil(dims / chunk)
  coords chunk_stride{};  // bytes between neighbours along each dimension inside a chunk
  std::size_t chunk_bytes = 0;
  std::uint64_t chunk_count = 0;

  // Call once dims, chunk, rank and element_size are set. The caller checked that chunk_bytes
  // and chunk_count do not overflow.
  void finish() noexcept {
    chunk_count = 1;
    std::size_t stride = element_size;
    for (int d = rank - 1; d >= 0; --d) {
      grid[d] = dims[d] == 0 ? 0 : (dims[d] - 1) / chunk[d] + 1;
      chunk_count *= grid[d];
      chunk_stride[d] = stride;
      stride *= static_cast<std::size_t>(chunk[d]);
    }
    chunk_bytes = stride;
  }

  // Grid position of the chunk with row-major index k (inverse of linear()).
  [[nodiscard]] coords position(std::uint64_t k) const noexcept {
    coords g{};
    for (int d = rank - 1; d >= 0; --d) {
      g[d] = grid[d] ? k % grid[d] : 0;
      k = grid[d] ? k / grid[d] : 0;
    }
    return g;
  }

  // Row-major index of the chunk at grid position g.
  [[nodiscard]] std::uint64_t linear(const coords& g) const noexcept {
    std::uint64_t k = 0;
    for (int d = 0; d < rank; ++d) k = k * grid[d] + g[d];
    return k;
  }
};

// Calls fn(linear_index, grid_position) for each chunk the (non-empty) box touches, row-major.
template <class Fn>
void for_each_chunk(const chunk_grid& cg, const record_box& box, Fn&& fn) {
  coords lo{}, hi{}, g{};
  for (int d = 0; d < cg.rank; ++d) {
    if (box.count[d] == 0) return;
    lo[d] = box.start[d] / cg.chunk[d];
    hi[d] = (box.start[d] + box.count[d] - 1) / cg.chunk[d];
    g[d] = lo[d];
  }
  while (true) {
    fn(cg.linear(g), static_cast<const coords&>(g));
    int d = cg.rank - 1;
    for (; d >= 0; --d) {
      if (g[d] < hi[d]) {
        ++g[d];
        break;
      }
      g[d] = lo[d];
    }
    if (d < 0) return;
  }
}

// The part of a record inside one chunk.
class chunk_part {
 public:
  chunk_part(const chunk_grid& cg, const record_box& box, const coords& g) noexcept
      : rank_(cg.rank) {
    // Record strides: the record is packed row-major at its own shape.
    std::size_t stride = cg.element_size;
    for (int d = cg.rank - 1; d >= 0; --d) {
      dst_stride_[d] = stride;
      stride *= static_cast<std::size_t>(box.count[d]);
      const std::uint64_t origin = g[d] * cg.chunk[d];
      lo_[d] = box.start[d] > origin ? box.start[d] : origin;
      const std::uint64_t box_end = box.start[d] + box.count[d];
      const std::uint64_t chunk_end = origin + cg.chunk[d];
      hi_[d] = box_end < chunk_end ? box_end : chunk_end;
      chunk_origin_[d] = origin;
      box_start_[d] = box.start[d];
      chunk_stride_[d] = cg.chunk_stride[d];
    }
    // Merge inner dimensions while the part spans them fully both in the chunk and the record.
    p_ = cg.rank - 1;
    std::uint64_t run = hi_[p_] - lo_[p_];
    while (p_ > 0) {
      const int d = p_;
      const bool full_in_chunk =
          lo_[d] == chunk_origin_[d] && hi_[d] == chunk_origin_[d] + cg.chunk[d];
      const bool full_in_box = lo_[d] == box.start[d] && hi_[d] == box.start[d] + box.count[d];
      if (!full_in_chunk || !full_in_box) break;
      --p_;
      run *= hi_[p_] - lo_[p_];
    }
    run_bytes_ = static_cast<std::size_t>(run) * cg.element_size;
    runs_ = 1;
    for (int d = 0; d < p_; ++d) runs_ *= hi_[d] - lo_[d];
  }

  [[nodiscard]] std::uint64_t runs() const noexcept { return runs_; }

  // Calls fn(byte offset in the chunk, byte offset in the record, bytes in the run) for each run
  // (every run of a part has the same length).
  template <class Fn>
  void for_each_run(Fn&& fn) const {
    coords idx = lo_;
    while (true) {
      std::size_t src = 0, dst = 0;
      for (int d = 0; d < rank_; ++d) {  // dimensions inside a run contribute 0
        src += static_cast<std::size_t>(idx[d] - chunk_origin_[d]) * chunk_stride_[d];
        dst += static_cast<std::size_t>(idx[d] - box_start_[d]) * dst_stride_[d];
      }
      fn(src, dst, run_bytes_);
      int d = p_ - 1;
      for (; d >= 0; --d) {
        if (++idx[d] < hi_[d]) break;
        idx[d] = lo_[d];
      }
      if (d < 0) return;
    }
  }

 private:
  int rank_ = 0;
  int p_ = 0;  // outermost dimension inside a run
  coords lo_{}, hi_{}, chunk_origin_{}, box_start_{}, chunk_stride_{}, dst_stride_{};
  std::size_t run_bytes_ = 0;
  std::uint64_t runs_ = 0;
};

}  // namespace gpufeed::detail::hdf5
