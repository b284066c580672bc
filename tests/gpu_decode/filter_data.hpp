// Test data for the GPU path of HDF5's shuffle and fletcher32 filters around deflate: chunks
// written as HDF5's filters write them (H5Zshuffle.c's byte planes, H5Zfletcher32.c's trailer,
// zlib), the CPU path's decode of a chunk's pipeline (the steps record_reader's decode takes, with
// the CPU filter functions), and the GPU plan's decode on the host's emulated warp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "codec_data.hpp"
#include "gpufeed/cuda/detail/codec/unit_failure.hpp"
#include "gpufeed/detail/hdf5/chunk_decoders.hpp"
#include "gpufeed/detail/hdf5/filters.hpp"
#include "gpufeed/detail/hdf5/gpu_chunk_plan.hpp"

namespace gpufeed_test {

namespace h5 = gpufeed::detail::hdf5;

// HDF5's shuffle: byte planes of the n / e elements, then the n % e leftover bytes as they are;
// as they are altogether with e <= 1 or fewer than two elements.
inline bytes shuffle_bytes(const bytes& in, std::size_t e) {
  const std::size_t elements = e ? in.size() / e : 0;
  if (e <= 1 || elements <= 1) return in;
  bytes out(in);
  for (std::size_t i = 0; i < elements; ++i)
    for (std::size_t b = 0; b < e; ++b) out[b * elements + i] = in[i * e + b];
  return out;
}

// The fletcher32 filter's output: the bytes, then their checksum little-endian.
inline bytes with_fletcher32(bytes in) {
  const std::uint32_t sum =
      h5::fletcher32(reinterpret_cast<const std::byte*>(in.data()), in.size());
  for (int k = 0; k < 4; ++k) in.push_back(static_cast<std::uint8_t>(sum >> (8 * k)));
  return in;
}

// The pipelines h5py writes for gzip + shuffle (+ fletcher32), in the order applied.
enum class layout { deflate, shuffle_deflate, shuffle_deflate_fletcher, fletcher_shuffle_deflate,
                    deflate_fletcher, fletcher_deflate };
constexpr layout all_layouts[] = {layout::deflate, layout::shuffle_deflate,
                                  layout::shuffle_deflate_fletcher,
                                  layout::fletcher_shuffle_deflate, layout::deflate_fletcher,
                                  layout::fletcher_deflate};

struct filtered_chunk {
  std::vector<h5::filter_step> pipeline;
  bytes stored;
};

inline h5::filter_step step(gpufeed::detail::codec::kind k, std::size_t e = 0) {
  h5::filter_step f;
  f.kind = k;
  f.element_size = e;
  return f;
}

// `data` through the layout's filters (shuffle with element size e, deflate at `level`).
inline filtered_chunk make_chunk(const bytes& data, layout l, std::size_t e, int level) {
  using k = gpufeed::detail::codec::kind;
  filtered_chunk c;
  bytes cur = data;
  auto apply = [&](k kind) {
    c.pipeline.push_back(step(kind, kind == k::shuffle ? e : 0));
    if (kind == k::shuffle) cur = shuffle_bytes(cur, e);
    if (kind == k::deflate) cur = zlib_compress(cur, level);
    if (kind == k::fletcher32) cur = with_fletcher32(cur);
  };
  switch (l) {
    case layout::deflate: apply(k::deflate); break;
    case layout::shuffle_deflate: apply(k::shuffle); apply(k::deflate); break;
    case layout::shuffle_deflate_fletcher:
      apply(k::shuffle); apply(k::deflate); apply(k::fletcher32); break;
    case layout::fletcher_shuffle_deflate:
      apply(k::fletcher32); apply(k::shuffle); apply(k::deflate); break;
    case layout::deflate_fletcher: apply(k::deflate); apply(k::fletcher32); break;
    case layout::fletcher_deflate: apply(k::fletcher32); apply(k::deflate); break;
  }
  c.stored = std::move(cur);
  return c;
}

// The CPU path's decode of one chunk: record_reader's steps (fletcher32_matches, unshuffle, the
// chunk decoders; a compressor decodes to the chunk plus the trailers of the fletcher32 filters
// applied before it; the size checks), its failures as the result it reports.
inline gpufeed::detail::codec::result cpu_decode_chunk(const filtered_chunk& c,
                                                       std::uint32_t mask, std::size_t chunk_bytes,
                                                       bytes& out) {
  namespace codec = gpufeed::detail::codec;
  using k = gpufeed::detail::codec::kind;
  out.assign(chunk_bytes, 0);
  const int n = static_cast<int>(c.pipeline.size());
  auto active = [&](int i) { return !(mask & (1u << i)); };
  int first = 0;
  while (first < n && !active(first)) ++first;
  bytes cur = c.stored;
  h5::chunk_decoders codecs;
  for (int i = n - 1; i >= 0; --i) {
    if (!active(i)) continue;
    const h5::filter_step& f = c.pipeline[static_cast<std::size_t>(i)];
    if (f.kind == k::fletcher32) {
      if (!h5::fletcher32_matches(reinterpret_cast<const std::byte*>(cur.data()), cur.size()))
        return codec::failed("fletcher32", "fletcher32 checksum mismatch");
      cur.resize(cur.size() - 4);
      continue;
    }
    std::size_t want = cur.size();
    if (h5::compresses(f)) {
      want = chunk_bytes;
      for (int j = 0; j < i; ++j)
        if (active(j) && c.pipeline[static_cast<std::size_t>(j)].kind == k::fletcher32) want += 4;
    }
    if (i == first && want != chunk_bytes)
      return codec::failed("filter pipeline", "decoded size " + std::to_string(want) +
                                                  " != chunk size " + std::to_string(chunk_bytes));
    bytes target(want);
    if (f.kind == k::shuffle) {
      h5::unshuffle(reinterpret_cast<const std::byte*>(cur.data()),
                    reinterpret_cast<std::byte*>(target.data()), cur.size(), f.element_size);
    } else if (const codec::result r = codecs.decode(f, as_bytes(cur),
                                                     {reinterpret_cast<std::byte*>(target.data()),
                                                      target.size()});
               !r.ok) {
      return r;
    }
    cur = std::move(target);
  }
  if (cur.size() != chunk_bytes)
    return codec::failed("filter pipeline", "decoded " + std::to_string(cur.size()) +
                                                " bytes, expected " + std::to_string(chunk_bytes));
  out = cur;
  return {};
}

// The GPU plan's decode on the emulated warp: the chunk placed at offsets in larger buffers, its
// units decoded with a stage buffer of exactly the planned size (an access past it is a
// sanitizer report), the outcome as chunk_failure words it. `plan` receives the plan.
inline gpufeed::detail::codec::result gpu_decode_chunk(const filtered_chunk& c, std::uint32_t mask,
                                                       std::size_t chunk_bytes, bytes& out,
                                                       h5::gpu_chunk_plan* plan = nullptr) {
  constexpr std::uint64_t src_base = 5, dst_base = 3;
  std::vector<gpufeed::detail::codec::gpu_unit> units;
  const h5::gpu_chunk_plan p = h5::plan_gpu_chunk(c.pipeline, mask, as_bytes(c.stored), chunk_bytes,
                                                  src_base, dst_base, 0, units);
  if (plan) *plan = p;
  if (!p.status.ok) return p.status;
  bytes src(src_base, 0);
  src.insert(src.end(), c.stored.begin(), c.stored.end());
  bytes dst(dst_base + chunk_bytes, 0xEE);
  std::vector<std::uint8_t> stage(p.stage_bytes);
  const auto status = host_decode_units(src, dst, units, p.stage_bytes ? stage.data() : nullptr);
  std::vector<std::uint32_t> words;
  for (const auto s : status) words.push_back(static_cast<std::uint32_t>(s));
  out.assign(dst.begin() + dst_base, dst.end());
  return gpufeed::cuda::detail::chunk_failure(units, words);
}

}  // namespace gpufeed_test
