// pad.cuh on a GPU, against a host reference: padded rows, lengths, truncation and malformed
// counts, the device max length, status handling, argument checks and the transform hook.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gpufeed/cuda/check.hpp"
#include "gpufeed/cuda/device_buffer.hpp"
#include "gpufeed/cuda/pad.cuh"
#include "gpufeed/cuda/stream.hpp"
#include "gpufeed/cuda/transform.hpp"

// Inside namespace gpufeed: `cuda::` then names gpufeed::cuda, not CCCL's ::cuda.
namespace gpufeed {

namespace {

struct host_batch {
  std::vector<unsigned char> data;
  std::vector<std::uint64_t> offsets;  // records + 1
  [[nodiscard]] std::size_t records() const { return offsets.size() - 1; }
};

// Records of the given byte lengths, packed after `lead` bytes and followed by `trail` bytes
// (all random, so a read outside a record shows up as a wrong byte).
host_batch make_batch(std::mt19937& rng, const std::vector<std::uint64_t>& byte_lengths,
                      std::size_t lead, std::size_t trail) {
  host_batch b;
  b.offsets.push_back(lead);
  for (const auto len : byte_lengths) b.offsets.push_back(b.offsets.back() + len);
  b.data.resize(b.offsets.back() + trail);
  for (auto& x : b.data) x = static_cast<unsigned char>(rng() & 0xffu);
  return b;
}

// Lengths in elements: zeros, exactly max_len, longer than max_len, and anything in between;
// record 0 is empty and record 1 too long whenever there are 3 or more.
std::vector<std::uint64_t> random_lengths(std::mt19937& rng, std::size_t records,
                                          std::uint64_t max_len) {
  std::vector<std::uint64_t> v(records);
  for (auto& len : v) {
    switch (rng() % 6) {
      case 0: len = 0; break;
      case 1: len = max_len; break;
      case 2: len = max_len + 1 + rng() % max_len; break;
      default: len = rng() % (max_len + 1);
    }
  }
  if (records >= 3) {
    v[0] = 0;
    v[1] = max_len + 1 + rng() % 5;
  }
  return v;
}

struct expected_pad {
  std::vector<unsigned char> rows;
  std::vector<std::uint32_t> lengths;
  std::uint64_t truncated = 0;
  std::uint64_t max_len = 0;  // of the untruncated, well-formed lengths
};

// The reference for well-formed batches.
expected_pad reference(const host_batch& b, std::size_t max_len, const cuda::pad_element& e) {
  expected_pad x;
  const std::size_t eb = e.bytes, row_bytes = max_len * eb;
  x.rows.resize(b.records() * row_bytes);
  for (std::size_t r = 0; r < b.records(); ++r) {
    const std::uint64_t len = (b.offsets[r + 1] - b.offsets[r]) / eb;
    const std::uint64_t kept = std::min<std::uint64_t>(len, max_len);
    x.lengths.push_back(static_cast<std::uint32_t>(kept));
    x.truncated += len > max_len;
    x.max_len = std::max(x.max_len, len);
    unsigned char* row = x.rows.data() + r * row_bytes;
    for (std::size_t c = 0; c < row_bytes; ++c)
      row[c] = c < kept * eb ? b.data[b.offsets[r] + c]
                             : static_cast<unsigned char>(e.bits >> (8 * (c % eb)));
  }
  return x;
}

// cudaMemcpy from pageable memory and cudaMemset may return before the device has finished them,
// and the streams used below are non-blocking (they do not wait for the legacy stream): wait.
void settle() { GPUFEED_CUDA_TRY(cudaDeviceSynchronize()); }

struct device_batch {
  cuda::device_buffer data, offsets;
  cuda::packed_batch view;
};

// Uploads b with its bytes data_shift bytes past a cudaMalloc'd address (which is exactly as
// large as it needs to be, so an out-of-bounds read would be caught by compute-sanitizer).
device_batch upload(const host_batch& b, std::size_t data_shift) {
  device_batch d{cuda::device_buffer(data_shift + b.data.size()),
                 cuda::device_buffer(b.offsets.size() * 8), {}};
  GPUFEED_CUDA_TRY(cudaMemcpy(d.data.data() + data_shift, b.data.data(), b.data.size(),
                              cudaMemcpyHostToDevice));
  GPUFEED_CUDA_TRY(cudaMemcpy(d.offsets.data(), b.offsets.data(), b.offsets.size() * 8,
                              cudaMemcpyHostToDevice));
  d.view.data = d.data.data() + data_shift;
  d.view.bytes = b.data.size();
  d.view.offsets = d.offsets.as<std::uint64_t>();
  d.view.records = b.records();
  settle();
  return d;
}

constexpr std::size_t guard = 64;

struct pad_result {
  std::vector<unsigned char> rows;
  std::vector<std::uint32_t> lengths;
  cuda::pad_status status;
  std::size_t guard_bytes_touched = 0;
  bool lengths_sentinel_intact = true;
};

// Pads d into rows out_shift bytes past guard bytes, and reads everything back.
pad_result run_pad(const cuda::padder& p, const device_batch& d, std::size_t max_len,
                   std::size_t out_shift, cuda::pad_status* status = nullptr) {
  const std::size_t records = d.view.records;
  const std::size_t rows_bytes = cuda::padded_bytes(records, max_len, p.element().bytes);
  const std::size_t out_bytes = guard + out_shift + rows_bytes + guard;
  cuda::device_buffer out(out_bytes), lengths((records + 1) * 4);
  GPUFEED_CUDA_TRY(cudaMemset(out.data(), 0x5a, out_bytes));
  GPUFEED_CUDA_TRY(cudaMemset(lengths.data(), 0xff, (records + 1) * 4));
  settle();
  cuda::padded_batch o;
  o.data = out.data() + guard + out_shift;
  o.lengths = lengths.as<std::uint32_t>();
  o.max_len = max_len;
  cuda::stream s;
  p(d.view, o, s, status);
  pad_result r;
  r.status = cuda::read_pad_status(status != nullptr ? status : p.own_status(), s);
  std::vector<unsigned char> host(out_bytes);
  GPUFEED_CUDA_TRY(cudaMemcpy(host.data(), out.data(), out_bytes, cudaMemcpyDeviceToHost));
  r.lengths.resize(records + 1);
  GPUFEED_CUDA_TRY(cudaMemcpy(r.lengths.data(), lengths.data(), (records + 1) * 4,
                              cudaMemcpyDeviceToHost));
  r.lengths_sentinel_intact = r.lengths.back() == 0xffffffffu;
  r.lengths.pop_back();
  r.rows.assign(host.begin() + guard + out_shift, host.end() - guard);
  for (std::size_t i = 0; i < guard + out_shift; ++i) r.guard_bytes_touched += host[i] != 0x5a;
  for (std::size_t i = out_bytes - guard; i < out_bytes; ++i)
    r.guard_bytes_touched += host[i] != 0x5a;
  return r;
}

std::uint64_t device_max_length(const cuda::padder& p, const cuda::packed_batch& in) {
  cuda::device_buffer m(8);
  GPUFEED_CUDA_TRY(cudaMemset(m.data(), 0xee, 8));
  settle();
  cuda::stream s;
  p.max_length(in, m.as<std::uint64_t>(), s);
  s.synchronize();
  std::uint64_t v = 0;
  GPUFEED_CUDA_TRY(cudaMemcpy(&v, m.data(), 8, cudaMemcpyDeviceToHost));
  return v;
}

std::size_t first_difference(const std::vector<unsigned char>& a,
                             const std::vector<unsigned char>& b) {
  const auto m = std::mismatch(a.begin(), a.end(), b.begin(), b.end());
  return static_cast<std::size_t>(m.first - a.begin());
}

cuda::pad_element element_of_size(std::size_t bytes) {
  switch (bytes) {
    case 1: return cuda::make_pad_element(std::uint8_t{0xab});
    case 2: return cuda::make_pad_element(std::uint16_t{0xbeef});
    case 4: return cuda::make_pad_element(std::uint32_t{0x04030201});  // shows the byte order
    default: return cuda::make_pad_element(std::uint64_t{0x0807060504030201ull});
  }
}

// Pads a random well-formed batch and checks every output against the reference.
void check_random(std::mt19937& rng, const cuda::padder& p, std::size_t records,
                  std::size_t max_len, std::size_t data_shift, std::size_t out_shift,
                  std::size_t lead, std::size_t trail) {
  const std::size_t eb = p.element().bytes;
  auto lengths = random_lengths(rng, records, max_len);
  for (auto& len : lengths) len *= eb;
  const host_batch b = make_batch(rng, lengths, lead, trail);
  const device_batch d = upload(b, data_shift);
  const expected_pad want = reference(b, max_len, p.element());
  const pad_result got = run_pad(p, d, max_len, out_shift);
  INFO("element " << eb << " bytes, records " << records << ", max_len " << max_len
                  << ", data_shift " << data_shift << ", out_shift " << out_shift << ", lead "
                  << lead << ", trail " << trail << ", first differing byte "
                  << first_difference(got.rows, want.rows));
  CHECK(got.rows == want.rows);
  CHECK(got.lengths == want.lengths);
  CHECK(got.lengths_sentinel_intact);
  CHECK(got.guard_bytes_touched == 0);
  CHECK(got.status.truncated == want.truncated);
  CHECK(got.status.malformed == 0);
  CHECK_FALSE(got.status.first_malformed().has_value());
  CHECK(device_max_length(p, d.view) == want.max_len);
}

}  // namespace

TEST_CASE("pad: random lengths (0 and > max_len), element sizes 1-8, unaligned pointers") {
  std::mt19937 rng(2024);
  const std::size_t shifts[][2] = {{0, 0}, {1, 3}, {3, 1}, {2, 6}};
  for (const std::size_t eb : {1, 2, 4, 8}) {
    const cuda::padder p(300, element_of_size(eb));
    for (const std::size_t max_len : {1, 2, 3, 37, 128, 1000}) {
      for (const std::size_t records : {1, 5, 300}) {
        for (const auto& sh : shifts) {
          check_random(rng, p, records, max_len, sh[0], sh[1], /*lead=*/13, /*trail=*/0);
          check_random(rng, p, records, max_len, sh[0], sh[1], /*lead=*/0, /*trail=*/5);
        }
      }
    }
  }
}

TEST_CASE("pad: many short rows (grid-stride over rows) and one long row (over chunks)") {
  std::mt19937 rng(77);
  const cuda::padder bytes(200000);
  check_random(rng, bytes, 200000, 300, 1, 0, 7, 3);
  check_random(rng, bytes, 200000, 16, 0, 0, 0, 0);
  const cuda::padder ints(4, cuda::make_pad_element(std::int32_t{-1}));
  check_random(rng, ints, 1, (std::size_t{4} << 20) + 3, 0, 1, 4, 0);
  check_random(rng, ints, 3, (std::size_t{1} << 20) + 1, 2, 2, 8, 4);
}

TEST_CASE("pad: malformed records are counted, named, padded, and never read out of bounds") {
  // element 4 bytes, max_len 8. Record 3 has 5 bytes (not whole elements), record 7's offsets
  // decrease (so record 8 starts 4 bytes early: 24 bytes), records 10 and 11 point past the data.
  std::mt19937 rng(3);
  const std::vector<std::uint64_t> lens = {8, 0, 40, 5, 4, 12, 32, 16, 4, 8, 4, 4};
  host_batch b = make_batch(rng, lens, 4, 0);
  const std::uint64_t data_bytes = b.data.size();
  b.offsets[8] = b.offsets[7] - 4;       // record 7 ends before it begins
  b.offsets[11] = data_bytes + 100;      // record 10 ends past the data
  b.offsets[12] = data_bytes + 104;      // record 11 lies past the data
  const device_batch d = upload(b, 1);
  const cuda::pad_element e = cuda::make_pad_element(std::int32_t{-7});
  const cuda::padder p(16, e);
  const pad_result got = run_pad(p, d, 8, 0);
  CHECK(got.status.malformed == 4);
  REQUIRE(got.status.first_malformed().has_value());
  CHECK(*got.status.first_malformed() == 3);
  CHECK(got.status.truncated == 1);  // record 2: 10 elements
  const std::vector<std::uint32_t> want_lengths = {2, 0, 8, 1, 1, 3, 8, 0, 6, 2, 0, 0};
  CHECK(got.lengths == want_lengths);
  CHECK(got.guard_bytes_touched == 0);
  // Every row: its kept elements from the record, the rest the pad element.
  std::size_t wrong = 0;
  for (std::size_t r = 0; r < 12; ++r) {
    for (std::size_t c = 0; c < 32; ++c) {
      const unsigned char want = c < want_lengths[r] * 4u
                                     ? b.data[b.offsets[r] + c]
                                     : static_cast<unsigned char>(e.bits >> (8 * (c % 4)));
      wrong += got.rows[r * 32 + c] != want;
    }
  }
  CHECK(wrong == 0);
  try {
    cuda::check_pad_status(got.status, "tokens.lmdb");
    FAIL("expected format_error");
  } catch (const format_error& err) {
    CHECK(err.record() == 3);
    CHECK(err.file() == "tokens.lmdb");
  }
  CHECK(device_max_length(p, d.view) == 10);
}

TEST_CASE("pad: the status is reset by every call; a caller's status leaves the own one alone") {
  std::mt19937 rng(8);
  const cuda::padder p(64);
  const host_batch b = make_batch(rng, {10, 20, 30, 0}, 0, 0);
  const device_batch d = upload(b, 0);
  CHECK(run_pad(p, d, 15, 0).status.truncated == 2);
  CHECK(run_pad(p, d, 30, 0).status.truncated == 0);
  CHECK(run_pad(p, d, 5, 0).status.truncated == 3);
  cuda::device_buffer mine(sizeof(cuda::pad_status));
  const pad_result r = run_pad(p, d, 1, 0, mine.as<cuda::pad_status>());
  CHECK(r.status.truncated == 3);
  cuda::stream s;
  CHECK(cuda::read_pad_status(p.own_status(), s).truncated == 3);  // still the previous call's
  // An empty batch only resets the status.
  GPUFEED_CUDA_TRY(cudaMemset(p.own_status(), 0xff, sizeof(cuda::pad_status)));
  settle();
  cuda::packed_batch empty;
  p(empty, cuda::padded_batch{}, s);
  const cuda::pad_status z = cuda::read_pad_status(p.own_status(), s);
  CHECK(z.truncated == 0);
  CHECK(z.malformed == 0);
  CHECK_FALSE(z.first_malformed().has_value());
  CHECK(device_max_length(p, empty) == 0);
}

TEST_CASE("pad: bad calls are config_errors before anything is queued") {
  cuda::padder p(4);
  cuda::device_buffer data(64), offsets(6 * 8), out(1024), m(8);
  cuda::packed_batch in;
  in.data = data.data();
  in.bytes = 64;
  in.offsets = offsets.as<std::uint64_t>();
  in.records = 5;
  cuda::padded_batch o;
  o.data = out.data();
  o.max_len = 8;
  cuda::stream s;
  CHECK_THROWS_AS(p(in, o, s), config_error);  // 5 > max_records
  CHECK_THROWS_AS(p.max_length(in, m.as<std::uint64_t>(), s), config_error);
  in.records = 4;
  o.max_len = 0;
  CHECK_THROWS_AS(p(in, o, s), config_error);
  o.max_len = std::size_t{1} << 32;
  CHECK_THROWS_AS(p(in, o, s), config_error);
  o.max_len = 8;
  o.data = nullptr;
  CHECK_THROWS_AS(p(in, o, s), config_error);
  o.data = out.data();
  in.offsets = nullptr;
  CHECK_THROWS_AS(p(in, o, s), config_error);
  CHECK_THROWS_AS(p.max_length(in, m.as<std::uint64_t>(), s), config_error);
  in.offsets = offsets.as<std::uint64_t>();
  in.data = nullptr;
  CHECK_THROWS_AS(p(in, o, s), config_error);
  in.data = data.data();
  CHECK_THROWS_AS(p.max_length(in, nullptr, s), config_error);
  cuda::padder moved(std::move(p));
  CHECK(moved.max_records() == 4);
  CHECK_THROWS_AS(p(in, o, s), config_error);  // NOLINT(bugprone-use-after-move): moved-from
  s.synchronize();
}

TEST_CASE("pad_transform: pads through the transform hook, lengths after the rows") {
  std::mt19937 rng(12);
  const cuda::padder p(32, cuda::make_pad_element(std::uint16_t{0xffff}));
  std::vector<std::uint64_t> lens = random_lengths(rng, 32, 9);
  for (auto& len : lens) len *= 2;
  const host_batch b = make_batch(rng, lens, 6, 2);
  const device_batch d = upload(b, 0);
  const std::size_t need = cuda::pad_transform_output_bytes(32, 9, 2);
  cuda::device_buffer out(need);
  cuda::transform_hook hook = cuda::pad_transform(p, 9);
  gpufeed::batch_view v;
  v.data = const_cast<std::byte*>(d.view.data);
  v.data_bytes = d.view.bytes;
  v.offsets = d.view.offsets;
  v.records = 32;
  v.output = out.data();
  v.output_bytes = need - 1;
  CHECK_THROWS_AS(hook(v, nullptr), config_error);
  v.output_bytes = need;
  cuda::stream s;
  hook(v, s);
  CHECK(v.output_bytes == need);
  const cuda::pad_status st = cuda::read_pad_status(p.own_status(), s);
  std::vector<unsigned char> host(need);
  GPUFEED_CUDA_TRY(cudaMemcpy(host.data(), out.data(), need, cudaMemcpyDeviceToHost));
  const expected_pad want = reference(b, 9, p.element());
  const std::size_t at = cuda::pad_transform_lengths_offset(32, 9, 2);
  std::vector<std::uint32_t> lengths(32);
  std::memcpy(lengths.data(), host.data() + at, 32 * 4);
  CHECK(std::vector<unsigned char>(host.begin(), host.begin() + 32 * 9 * 2) == want.rows);
  CHECK(lengths == want.lengths);
  CHECK(st.truncated == want.truncated);
  v.offsets = nullptr;
  CHECK_THROWS_AS(hook(v, s), unsupported_error);
}

}  // namespace gpufeed
