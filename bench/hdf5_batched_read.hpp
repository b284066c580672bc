// hdf5_read_bench's batched H5Dread baselines: what an HDF5 user does before writing a loader.
//   H5Dread-batch   one H5Dread per batch of `batch` contiguous rows (a (batch, 16384) hyperslab)
//   H5Dread-sorted  one H5Dread per batch of `batch` random rows, sorted, selected as a union
//                   of one-row hyperslabs (H5S_SELECT_OR; what h5py's fancy indexing with sorted
//                   indices builds)
// Batches are numbered 0..n/batch-1; the sorted batches cut one random permutation of the rows.
#pragma once

#include <hdf5.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace h5batch {

class reader_state {
 public:
  reader_state(hid_t dataset, std::size_t rows, std::size_t row_bytes)
      : file_space_(H5Dget_space(dataset)), buf_(rows * row_bytes) {
    const hsize_t count[2] = {rows, row_bytes};
    mem_space_ = H5Screate_simple(2, count, nullptr);
    if (file_space_ < 0 || mem_space_ < 0) throw std::runtime_error("H5Dget_space/H5Screate failed");
  }
  reader_state(const reader_state&) = delete;
  reader_state(reader_state&& o) noexcept
      : file_space_(std::exchange(o.file_space_, -1)), mem_space_(std::exchange(o.mem_space_, -1)),
        buf_(std::move(o.buf_)) {}
  ~reader_state() {
    if (file_space_ >= 0) H5Sclose(file_space_);
    if (mem_space_ >= 0) H5Sclose(mem_space_);
  }
  [[nodiscard]] hid_t file_space() const noexcept { return file_space_; }
  [[nodiscard]] hid_t mem_space() const noexcept { return mem_space_; }
  [[nodiscard]] std::vector<std::byte>& buffer() noexcept { return buf_; }

 private:
  hid_t file_space_ = -1, mem_space_ = -1;
  std::vector<std::byte> buf_;
};

class plan {
 public:
  plan(std::uint64_t rows, std::size_t batch, std::size_t row_bytes, std::uint64_t seed)
      : batch_(batch), row_bytes_(row_bytes), perm_(rows) {
    std::iota(perm_.begin(), perm_.end(), 0);
    std::shuffle(perm_.begin(), perm_.end(), std::mt19937_64(seed));
    for (std::uint64_t b = 0; b < batches(); ++b)
      std::sort(perm_.begin() + static_cast<std::ptrdiff_t>(b * batch_),
                perm_.begin() + static_cast<std::ptrdiff_t>((b + 1) * batch_));
  }
  [[nodiscard]] std::uint64_t batches() const noexcept { return perm_.size() / batch_; }
  [[nodiscard]] std::size_t batch() const noexcept { return batch_; }
  // Row k of sorted batch b.
  [[nodiscard]] std::uint64_t sorted_row(std::uint64_t b, std::size_t k) const {
    return perm_[b * batch_ + k];
  }

  // Rows [b * batch, (b + 1) * batch) into s.buffer(): one hyperslab, one H5Dread.
  void read_contiguous(hid_t d, reader_state& s, std::uint64_t b) const {
    const hsize_t start[2] = {b * batch_, 0}, count[2] = {batch_, row_bytes_};
    H5Sselect_hyperslab(s.file_space(), H5S_SELECT_SET, start, nullptr, count, nullptr);
    if (H5Dread(d, H5T_NATIVE_UINT8, s.mem_space(), s.file_space(), H5P_DEFAULT,
                s.buffer().data()) < 0)
      throw std::runtime_error("H5Dread (contiguous batch) failed");
  }
  // The sorted rows of batch b into s.buffer(), in that order: a union of one-row hyperslabs
  // (built per batch, as a user's code does), one H5Dread.
  void read_sorted(hid_t d, reader_state& s, std::uint64_t b) const {
    H5Sselect_none(s.file_space());
    for (std::size_t k = 0; k < batch_; ++k) {
      const hsize_t start[2] = {sorted_row(b, k), 0}, count[2] = {1, row_bytes_};
      H5Sselect_hyperslab(s.file_space(), H5S_SELECT_OR, start, nullptr, count, nullptr);
    }
    if (H5Dread(d, H5T_NATIVE_UINT8, s.mem_space(), s.file_space(), H5P_DEFAULT,
                s.buffer().data()) < 0)
      throw std::runtime_error("H5Dread (sorted batch) failed");
  }

 private:
  std::size_t batch_, row_bytes_;
  std::vector<std::uint64_t> perm_;
};

}  // namespace h5batch
