// The device engine's decode path (unit_decoder): a batch's compressed LZ4, Bitshuffle and
// gzip + shuffle (+ fletcher32) chunks decode into the device cache and its runs (128-byte rows,
// unaligned pieces, whole large chunks) gather into the slot beside the head copied from staging,
// byte for byte what the host decodes; statuses are the units' (the emulated warp's), a corrupted
// LZ4 unit fails alone; a run outside the cache or the slot is refused without a fault and the
// batch's other runs still land; work past the work area, or a unit outside the compressed bytes
// or the cache, is refused before anything is queued;
// overwrite() replaces a slot; reclaim() hands back the staging token; counters add up.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "codec_data.hpp"
#include "filter_data.hpp"
#include "gpufeed/cuda/device_decode.cuh"
#include "gpufeed/cuda/device_target.hpp"
#include "gpufeed/cuda/pinned.hpp"
#include "gpufeed/cuda/stream.hpp"
#include "gpufeed/error.hpp"

using namespace gpufeed_test;
namespace cd = gpufeed::cuda::detail;
namespace codec = gpufeed::detail::codec;
namespace dd = gpufeed::detail::device_decode;

namespace {

constexpr std::size_t cache_bytes = 16u << 20;
constexpr std::size_t work_bytes = 8u << 20;
constexpr std::size_t slot_bytes = 6u << 20;
constexpr std::size_t data_offset = 4096;  // the head's metadata before the batch's data region
constexpr std::size_t host_records = 512;  // data bytes read on the host, copied with the head

// Decoded chunks placed in a host image of the device cache, their compressed bytes and units.
struct planned_cache {
  bytes compressed, image;           // image: what the cache holds after the decode
  std::vector<codec::gpu_unit> units;
  std::vector<std::uint64_t> place;  // each chunk's cache offset
  std::vector<std::size_t> size;     // and decoded size
};

planned_cache plan_chunks(std::mt19937_64& rng) {
  planned_cache c;
  std::uint64_t at = 0;
  std::vector<filtered_chunk> staged;
  std::vector<bytes> decoded;
  const auto place = [&](std::size_t n) {
    at = (at + 255) / 256 * 256 + (c.place.size() % 3) * 16;  // some places only 16-aligned
    c.place.push_back(at);
    c.size.push_back(n);
    at += n;
    return c.place.back();
  };
  // LZ4 filter chunks (one of 1.25 MiB: room for a 1 MiB run), Bitshuffle + LZ4 chunks.
  for (int k = 0; k < 6; ++k) {
    const std::size_t n = k == 0 ? (5u << 18) : 4 * (20000 + rng() % 40000);
    const bytes data = make_bytes(static_cast<pattern>(k % 5 == 0 ? 1 : k % 5), n, rng);
    const bytes chunk = k % 3 == 2 ? bitshuffle_chunk(data, 4, 2048, 2)
                                   : lz4_filter_chunk(data, k % 2 ? 16384 : 65536);
    const std::uint64_t dst = place(n);
    const auto ok = k % 3 == 2 ? codec::plan_bitshuffle_chunk(as_bytes(chunk), c.compressed.size(),
                                                              dst, n, 4, 2048, 2, c.units)
                               : codec::plan_lz4_chunk(as_bytes(chunk), c.compressed.size(), dst,
                                                       n, c.units);
    REQUIRE(ok.ok);
    c.compressed.insert(c.compressed.end(), chunk.begin(), chunk.end());
    decoded.push_back(data);
  }
  // h5py's gzip + shuffle chunks, one with a trailing fletcher32: their stage lies in the cache
  // after every place (a unit's stage is cache memory nothing else uses during the decode).
  std::vector<std::size_t> gz_first;
  for (int k = 0; k < 3; ++k) {
    const std::size_t n = 4 * (10000 + rng() % 20000);
    const bytes data = make_bytes(pattern::smooth_floats, n, rng);
    staged.push_back(make_chunk(data, k == 2 ? layout::shuffle_deflate_fletcher
                                             : layout::shuffle_deflate, 4, 4));
    place(n);
    decoded.push_back(data);
  }
  std::uint64_t stage = (at + 255) / 256 * 256;
  for (std::size_t k = 0; k < staged.size(); ++k) {
    const std::size_t i = 6 + k;
    const auto p = h5::plan_gpu_chunk(staged[k].pipeline, 0, as_bytes(staged[k].stored), c.size[i],
                                      c.compressed.size(), c.place[i], stage, c.units);
    REQUIRE(p.status.ok);
    stage += (p.stage_bytes + 255) / 256 * 256;
    c.compressed.insert(c.compressed.end(), staged[k].stored.begin(), staged[k].stored.end());
  }
  REQUIRE(stage <= cache_bytes);
  c.image.assign(cache_bytes, 0);
  for (std::size_t i = 0; i < decoded.size(); ++i)
    std::copy(decoded[i].begin(), decoded[i].end(), c.image.begin() + c.place[i]);
  return c;
}

// A batch's runs: rows of 128 bytes, unaligned pieces, whole chunks and one 1 MiB run, packed
// one after another into the data region after the host records (some dst 16-aligned, some not).
std::vector<dd::gather_run> make_runs(const planned_cache& c, std::mt19937_64& rng) {
  std::vector<dd::gather_run> runs;
  std::uint64_t dst = host_records;
  const auto add = [&](std::uint64_t src, std::uint64_t len) {
    runs.push_back({src, dst, len});
    dst += len;
  };
  for (int i = 0; i < 3000; ++i) {  // rows
    const std::size_t k = rng() % c.place.size();
    add(c.place[k] + 128 * (rng() % (c.size[k] / 128)), 128);
  }
  for (int i = 0; i < 300; ++i) {  // unaligned pieces of every length class
    const std::size_t k = rng() % c.place.size();
    const std::uint64_t len = 1 + rng() % (i % 3 == 0 ? 40 : i % 3 == 1 ? 1000 : 20000);
    add(c.place[k] + rng() % (c.size[k] - len), len);
  }
  for (std::size_t k = 1; k < c.place.size(); ++k) add(c.place[k], c.size[k]);  // whole chunks
  dst = (dst + 15) / 16 * 16;
  add(c.place[0] + 4096, 1u << 20);  // one 1 MiB run, 16-aligned at both ends
  add(c.place[0] + 3, (1u << 16) + 5);  // and a large one aligned at neither
  return runs;
}

// The slot image the host expects: the head from staging, then the runs from the cache image.
bytes expected_slot(const bytes& staging, std::size_t head, const planned_cache& c,
                    const std::vector<dd::gather_run>& runs, std::size_t bytes_out) {
  bytes out(bytes_out, 0);
  std::copy(staging.begin(), staging.begin() + static_cast<std::ptrdiff_t>(head), out.begin());
  for (const auto& r : runs)
    std::copy(c.image.begin() + static_cast<std::ptrdiff_t>(r.src),
              c.image.begin() + static_cast<std::ptrdiff_t>(r.src + r.len),
              out.begin() + static_cast<std::ptrdiff_t>(data_offset + r.dst));
  return out;
}

// Pinned copies of the batch's work, as the loader hands it over.
struct pinned_work {
  gpufeed::cuda::pinned_buffer compressed, units, runs;
  dd::work_image image;
  pinned_work(const bytes& src, const std::vector<codec::gpu_unit>& u,
              const std::vector<dd::gather_run>& r)
      : compressed(src.size()), units(u.size() * sizeof(codec::gpu_unit)),
        runs(r.size() * sizeof(dd::gather_run)) {
    std::memcpy(compressed.data(), src.data(), src.size());
    std::memcpy(units.data(), u.data(), units.size());
    std::memcpy(runs.data(), r.data(), runs.size());
    image.compressed = compressed.data();
    image.compressed_bytes = src.size();
    image.units = reinterpret_cast<const codec::gpu_unit*>(units.data());
    image.unit_count = u.size();
    image.runs = reinterpret_cast<const dd::gather_run*>(runs.data());
    image.run_count = r.size();
    image.data_offset = data_offset;
  }
};

gpufeed::cuda::pinned_buffer pinned_copy(const bytes& b) {
  gpufeed::cuda::pinned_buffer p(b.size());
  std::memcpy(p.data(), b.data(), b.size());
  return p;
}

// Delivers slot d on `consumer` and reads it back.
bytes read_slot(gpufeed::cuda::device_engine& e, std::size_t d,
                const gpufeed::cuda::stream& consumer, std::size_t n) {
  e.acquire(d, consumer.get());
  bytes out(n);
  GPUFEED_CUDA_TRY(cudaMemcpyAsync(out.data(), e.slot(d).data, n, cudaMemcpyDeviceToHost,
                                   consumer));
  consumer.synchronize();
  return out;
}

// Polls reclaim() until `token` comes back (the copies are done long before: bounded wait);
// `seen` keeps the tokens earlier calls collected, since one call hands back all that are done.
bool reclaimed(gpufeed::cuda::device_engine& e, std::size_t token,
               std::vector<std::size_t>& seen) {
  for (int i = 0; i < 10000; ++i) {
    if (std::find(seen.begin(), seen.end(), token) != seen.end()) return true;
    e.reclaim(seen);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

// The end of the data the runs write, from the slot's start.
std::size_t image_end(const std::vector<dd::gather_run>& runs) {
  std::uint64_t end = host_records;
  for (const auto& r : runs) end = std::max(end, r.dst + r.len);
  return data_offset + end;
}

}  // namespace

TEST_CASE("assemble decodes a batch's chunks on the device and gathers its runs into the slot") {
  std::mt19937_64 rng(21);
  const planned_cache c = plan_chunks(rng);
  const std::vector<dd::gather_run> runs = make_runs(c, rng);
  bytes staging_bytes(data_offset + host_records);
  for (auto& b : staging_bytes) b = static_cast<std::uint8_t>(rng());
  const auto staging = pinned_copy(staging_bytes);
  pinned_work work(c.compressed, c.units, runs);
  const std::size_t n = image_end(runs);
  REQUIRE(n <= slot_bytes);

  gpufeed::cuda::device_engine e(0);
  std::vector<std::size_t> seen;  // tokens reclaim() handed back
  e.configure(slot_bytes, 0, 2, 2);
  REQUIRE(e.decoder() == &e);
  e.configure_decode(cache_bytes, work_bytes);
  gpufeed::cuda::stream consumer;
  for (std::size_t d = 0; d < 2; ++d) {  // both slots, both copy streams, the cache reused
    e.assemble(d, d, staging.data(), staging_bytes.size(), work.image, 40 + d);
    e.complete(d, d, {}, gpufeed::batch_view{});
  }
  const bytes want = expected_slot(staging_bytes, staging_bytes.size(), c, runs, n);
  for (std::size_t d = 0; d < 2; ++d) {
    INFO("slot " << d);
    CHECK(read_slot(e, d, consumer, n) == want);
    const std::vector<std::uint32_t> s = e.statuses(d);
    REQUIRE(s.size() == c.units.size() + 1);
    for (std::size_t i = 0; i < s.size(); ++i) {
      INFO("status " << i);
      CHECK(s[i] == dd::unit_ok);
    }
    CHECK(reclaimed(e, 40 + d, seen));
    e.release(d, consumer.get());
  }
  // The next batch into slot 0 waits for its release, then lands as the first did.
  e.assemble(0, 1, staging.data(), staging_bytes.size(), work.image, 42);
  e.complete(0, 1, {}, gpufeed::batch_view{});
  CHECK(read_slot(e, 0, consumer, n) == want);
  CHECK(reclaimed(e, 42, seen));
  e.release(0, consumer.get());

  const gpufeed::device_decode_counters k = e.decode_counters();
  std::uint64_t gathered = 0;
  for (const auto& r : runs) gathered += r.len;
  CHECK(k.batches == 3);
  CHECK(k.units == 3 * c.units.size());
  CHECK(k.compressed_bytes == 3 * c.compressed.size());
  CHECK(k.gathered_bytes == 3 * gathered);
  CHECK(k.host_bytes == 3 * staging_bytes.size());
  CHECK(k.cache_bytes == cache_bytes);
  CHECK(k.work_bytes == 2 * work_bytes);
  CHECK(k.timed_batches == 3);  // every batch's decode had finished when the counters were read
  CHECK(k.decode_seconds > 0);
  e.drain();
  CHECK(cudaGetLastError() == cudaSuccess);
}

TEST_CASE("a corrupted LZ4 unit fails alone; out-of-range runs are refused without a fault") {
  std::mt19937_64 rng(22);
  planned_cache c = plan_chunks(rng);
  std::vector<dd::gather_run> runs = make_runs(c, rng);
  // Corrupt one LZ4 block (not one stored raw): cut short, it cannot reach its decoded size.
  std::size_t bad = c.units.size();
  for (std::size_t i = 0; i < c.units.size() && bad == c.units.size(); ++i)
    if (c.units[i].kind == codec::gpu_unit_kind::lz4_block && c.units[i].src_size > 64) bad = i;
  REQUIRE(bad < c.units.size());
  c.units[bad].src_size = 5;
  bytes host_cache(cache_bytes, 0);
  bytes host_stage = c.image;  // the emulated warp's stage: any memory of the cache's size
  const auto host_status = host_decode_units(c.compressed, host_cache, c.units, host_stage.data());
  REQUIRE(host_status[bad] != cd::unit_status::ok);

  const std::size_t n = image_end(runs);
  const std::uint64_t good = runs.size();
  runs.push_back({cache_bytes - 100, 0, 101});                // past the cache
  runs.push_back({0, slot_bytes - data_offset - 10, 11});     // past the slot
  runs.push_back({~std::uint64_t{0} - 4, 0, 16});             // wraps around
  runs.push_back({0, 0, ~std::uint64_t{0}});                   // longer than anything

  bytes staging_bytes(data_offset + host_records, 0x5A);
  const auto staging = pinned_copy(staging_bytes);
  pinned_work work(c.compressed, c.units, runs);
  gpufeed::cuda::device_engine e(0);
  std::vector<std::size_t> seen;  // tokens reclaim() handed back
  e.configure(slot_bytes, 0, 1, 1);
  e.configure_decode(cache_bytes, work_bytes);
  const bytes before(slot_bytes, 0xC3);
  e.overwrite(0, reinterpret_cast<const std::byte*>(before.data()), before.size());

  e.assemble(0, 0, staging.data(), staging_bytes.size(), work.image, 9);
  e.complete(0, 0, {}, gpufeed::batch_view{});
  gpufeed::cuda::stream consumer;
  bytes got = read_slot(e, 0, consumer, slot_bytes);
  const std::vector<std::uint32_t> s = e.statuses(0);
  REQUIRE(s.size() == c.units.size() + 1);
  for (std::size_t i = 0; i < c.units.size(); ++i) {
    INFO("unit " << i);
    CHECK(s[i] == static_cast<std::uint32_t>(host_status[i]));
    CHECK((s[i] != dd::unit_ok) == (i == bad));
  }
  CHECK(s.back() == dd::gather_out_of_range);
  // The good runs landed; the bytes of the corrupted unit's place are whatever it decoded, so
  // compare only runs that do not touch it.
  const std::uint64_t bad_from = c.units[bad].dst, bad_to = bad_from + c.units[bad].dst_size;
  std::vector<dd::gather_run> kept(runs.begin(), runs.begin() + static_cast<std::ptrdiff_t>(good));
  bytes want = expected_slot(staging_bytes, staging_bytes.size(), c, {}, slot_bytes);
  std::copy(before.begin() + static_cast<std::ptrdiff_t>(staging_bytes.size()), before.end(),
            want.begin() + static_cast<std::ptrdiff_t>(staging_bytes.size()));
  for (const auto& r : kept) {
    const bool touches = r.src < bad_to && r.src + r.len > bad_from;
    const auto at = static_cast<std::ptrdiff_t>(data_offset + r.dst);
    if (touches)
      std::copy(got.begin() + at, got.begin() + at + static_cast<std::ptrdiff_t>(r.len),
                want.begin() + at);
    else
      std::copy(c.image.begin() + static_cast<std::ptrdiff_t>(r.src),
                c.image.begin() + static_cast<std::ptrdiff_t>(r.src + r.len), want.begin() + at);
  }
  CHECK(got == want);  // the refused runs wrote nothing (their places keep the 0xC3 fill)
  CHECK(n <= slot_bytes);
  CHECK(reclaimed(e, 9, seen));
  e.release(0, consumer.get());

  // overwrite(): the batch redone on the host replaces the slot.
  bytes redone(n);
  for (auto& b : redone) b = static_cast<std::uint8_t>(rng());
  e.overwrite(0, reinterpret_cast<const std::byte*>(redone.data()), redone.size());
  bytes back(n);
  GPUFEED_CUDA_TRY(cudaMemcpy(back.data(), e.slot(0).data, n, cudaMemcpyDeviceToHost));
  CHECK(back == redone);
  e.drain();
  CHECK(cudaGetLastError() == cudaSuccess);
  CHECK(cudaDeviceSynchronize() == cudaSuccess);  // no sticky fault
}

TEST_CASE("work past its area, a unit outside the cache: refused before anything is queued") {
  std::mt19937_64 rng(23);
  const planned_cache c = plan_chunks(rng);
  const std::vector<dd::gather_run> runs = make_runs(c, rng);
  bytes staging_bytes(data_offset, 1);
  const auto staging = pinned_copy(staging_bytes);
  pinned_work work(c.compressed, c.units, runs);
  gpufeed::cuda::device_engine e(0);
  std::vector<std::size_t> seen;  // tokens reclaim() handed back
  e.configure(slot_bytes, 0, 1, 1);
  CHECK_THROWS_AS(e.assemble(0, 0, staging.data(), data_offset, work.image, 1),
                  gpufeed::config_error);  // before configure_decode()
  e.configure_decode(cache_bytes, c.compressed.size());  // too small for units and runs
  CHECK_THROWS_AS(e.assemble(0, 0, staging.data(), data_offset, work.image, 1),
                  gpufeed::config_error);
  dd::work_image beyond = work.image;
  beyond.data_offset = slot_bytes + 1;
  CHECK_THROWS_AS(e.assemble(0, 0, staging.data(), data_offset, beyond, 2),
                  gpufeed::config_error);
  CHECK_THROWS_AS(e.assemble(0, 0, staging.data(), slot_bytes + 1, dd::work_image{}, 3),
                  gpufeed::config_error);
  e.configure_decode(cache_bytes, work_bytes);
  for (int field = 0; field < 3; ++field) {  // a unit outside the compressed bytes or the cache
    std::vector<codec::gpu_unit> units = c.units;
    if (field == 0) units[0].src = c.compressed.size() - units[0].src_size + 1;
    if (field == 1) units[0].dst = cache_bytes - units[0].dst_size + 1;
    if (field == 2) units.back().stage = cache_bytes - 8;  // the last chunk is staged
    REQUIRE(codec::gpu_unit_stage_bytes(units.back()) > 8);
    pinned_work outside(c.compressed, units, runs);
    CHECK_THROWS_AS(e.assemble(0, 0, staging.data(), data_offset, outside.image, 5 + field),
                    gpufeed::config_error);
  }
  CHECK(e.reclaim(seen) == 0);  // nothing was queued: no token comes back
  CHECK(e.decode_counters().batches == 0);
  // An empty batch (no units, no runs) is only its head.
  e.assemble(0, 0, staging.data(), data_offset, dd::work_image{}, 4);
  e.complete(0, 0, {}, gpufeed::batch_view{});
  gpufeed::cuda::stream consumer;
  CHECK(read_slot(e, 0, consumer, data_offset) == staging_bytes);
  CHECK(e.statuses(0) == std::vector<std::uint32_t>{dd::unit_ok});
  CHECK(reclaimed(e, 4, seen));
  e.release(0, consumer.get());
  e.drain();
}
