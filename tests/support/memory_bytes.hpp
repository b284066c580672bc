// A test double of the byte-source seam (gpufeed/detail/io/byte_source.hpp): bytes held in memory,
// named as told, with knobs for what a real source does to its readers — short reads, EINTR, a
// failing device, a source cut short after it was opened — and counters of the primitive calls
// the seam's helpers made. It implements only the primitives: every check (short reads
// continued, EINTR retried, truncation and failure reported) is the seam's own.
#pragma once

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "gpufeed/detail/io/byte_source.hpp"

namespace gpufeed::test {

class memory_bytes final : public gpufeed::detail::io::byte_source {
 public:
  using read_attempt = gpufeed::detail::io::read_attempt;

  memory_bytes(std::vector<std::byte> bytes, std::string name)
      : bytes_(std::move(bytes)), name_(std::move(name)), left_(bytes_.size()) {}

  // The bytes of the file at `path`, named as the file.
  static std::vector<std::byte> file_bytes(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error("memory_bytes: cannot read " + path.string());
    std::vector<char> c((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::vector<std::byte> b(c.size());
    if (!c.empty()) std::memcpy(b.data(), c.data(), c.size());
    return b;
  }

  [[nodiscard]] std::uint64_t size() const noexcept override { return bytes_.size(); }
  [[nodiscard]] const std::string& name() const noexcept override { return name_; }

  // --- knobs (set before the reads they are for) ---
  // Reads find only the first n bytes from now on (a file truncated after it was opened).
  void cut(std::size_t n) noexcept { left_.store(std::min(n, bytes_.size())); }
  // Every attempt fails with errno e (0: none).
  void fail_with(int e) noexcept { fail_.store(e); }
  // The next n attempts are interrupted (EINTR, nothing read).
  void interrupt(int n) noexcept { interrupts_.store(n); }
  // Each attempt reads at most n bytes (0: all it is asked for): short reads.
  void at_most(std::size_t n) noexcept { at_most_ = n; }
  // Scatter attempts fill every buffer they can (true) or only the first, the seam's default.
  void vectored(bool v) noexcept { vectored_ = v; }

  // --- what the seam did ---
  [[nodiscard]] long reads() const noexcept { return reads_.load(); }
  [[nodiscard]] long scatter_reads() const noexcept { return scatter_reads_.load(); }
  [[nodiscard]] long closes() const noexcept { return closes_.load(); }
  [[nodiscard]] long reopens() const noexcept { return reopens_.load(); }
  [[nodiscard]] long advised() const noexcept { return advised_.load(); }

  void will_need(std::uint64_t, std::uint64_t) const noexcept override { ++advised_; }
  void close() noexcept override { ++closes_; }
  void reopen() override { ++reopens_; }

 protected:
  read_attempt read_some(void* dst, std::size_t n, std::uint64_t offset) const noexcept override {
    ++reads_;
    return attempt(static_cast<std::byte*>(dst), n, offset);
  }
  read_attempt read_some_scatter(const iovec* parts, std::size_t count,
                                 std::uint64_t offset) const noexcept override {
    ++scatter_reads_;
    if (!vectored_) return byte_source::read_some_scatter(parts, count, offset);
    std::size_t total = 0;
    for (std::size_t k = 0; k < count; ++k) {
      const read_attempt a =
          attempt(static_cast<std::byte*>(parts[k].iov_base), parts[k].iov_len, offset + total);
      if (a.err) return total ? read_attempt{total, 0} : a;
      total += a.got;
      if (a.got < parts[k].iov_len) break;
    }
    return {total, 0};
  }
  [[nodiscard]] const char* api(bool scatter) const noexcept override {
    return scatter ? "memory scatter" : "memory";
  }

 private:
  read_attempt attempt(std::byte* dst, std::size_t n, std::uint64_t offset) const noexcept {
    if (int left = interrupts_.load(); left > 0 && interrupts_.compare_exchange_strong(left, left - 1))
      return {0, EINTR};
    if (const int e = fail_.load()) return {0, e};
    const std::size_t end = left_.load();
    if (offset >= end) return {0, 0};
    std::size_t got = std::min<std::uint64_t>(n, end - offset);
    if (at_most_ && got > at_most_) got = at_most_;
    std::memcpy(dst, bytes_.data() + offset, got);
    return {got, 0};
  }

  std::vector<std::byte> bytes_;
  std::string name_;
  std::atomic<std::size_t> left_;
  std::atomic<int> fail_{0};
  mutable std::atomic<int> interrupts_{0};
  std::size_t at_most_ = 0;
  bool vectored_ = true;
  mutable std::atomic<long> reads_{0}, scatter_reads_{0}, closes_{0}, reopens_{0}, advised_{0};
};

}  // namespace gpufeed::test
