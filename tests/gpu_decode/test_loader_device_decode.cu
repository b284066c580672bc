// The loader decoding on a real GPU (loader_config::decode = device; docs/design.md, "GPU decode
// in the loader"): shards packed with LZ4, Bitshuffle + LZ4 and deflate (records straddling
// 64 KiB chunks), and a fixed-row dataset written with shuffle + deflate + fletcher32 whose rows
// span several chunks, delivered into GPU memory in every order: each record exactly once, each
// byte equal to the host path's read; nothing decoded on the host; the device decoded units. A
// flipped byte inside an LZ4 block: the batch is read again on the host and the record's
// corrupt_error names it, as the host path's does.
#include <doctest/doctest.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "gpufeed/cuda/device_decode.cuh"
#include "gpufeed/cuda/device_target.hpp"
#include "gpufeed/hdf5_source.hpp"
#include "gpufeed/loader.hpp"
#include "gpufeed/pack/pack.hpp"
#include "h5_writer.hpp"
#include "test_util.hpp"

using namespace gpufeed;
namespace fs = std::filesystem;

namespace {

// Files of compressible bytes (runs and a slow ramp: LZ4 and deflate both shrink them).
std::vector<pack_input> write_inputs(const fs::path& dir, std::size_t n) {
  std::mt19937_64 rng(7);
  std::vector<pack_input> in;
  fs::create_directories(dir);
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t size = 1000 + rng() % 40000;
    std::vector<char> b(size);
    for (std::size_t k = 0; k < size; ++k)
      b[k] = static_cast<char>((k / 7 + i * 13 + (rng() % 16 == 0 ? rng() : 0)) & 0xff);
    const fs::path p = dir / ("r" + std::to_string(i) + ".bin");
    std::ofstream(p, std::ios::binary).write(b.data(), static_cast<std::streamsize>(size));
    in.push_back(pack_input{p, p.filename().string(), std::nullopt});
  }
  return in;
}

std::vector<std::vector<std::byte>> host_records(const hdf5_source& src) {
  std::vector<std::vector<std::byte>> out(src.size());
  for (std::uint64_t i = 0; i < src.size(); ++i) {
    out[i].resize(src.record_size(i));
    src.read(i, out[i]);
  }
  return out;
}

struct epoch {
  std::size_t bad = 0;
  std::vector<std::uint64_t> seen;
  loader_stats stats;
};

epoch run(const hdf5_source& src, const std::vector<std::vector<std::byte>>& want,
          sample_order order) {
  loader_config c;
  c.batch_size = 24;
  c.order = order;
  c.workers = 4;
  c.epochs = 1;
  c.decode = decode_site::device;
  c.target = cuda::device(0);
  loader<hdf5_source> l(src, c);
  epoch e;
  std::vector<std::byte> host;
  while (auto b = l.next()) {
    const auto data = b->data();
    host.resize(data.size());
    REQUIRE(cudaMemcpy(host.data(), data.data(), data.size(), cudaMemcpyDeviceToHost) ==
            cudaSuccess);
    const auto off = b->host_offsets();
    for (std::size_t k = 0; k < b->size(); ++k) {
      const std::uint64_t i = b->host_indices()[k];
      REQUIRE(i < want.size());
      const auto* p = host.data() + off[k];
      if (off[k + 1] - off[k] != want[i].size() || !std::equal(want[i].begin(), want[i].end(), p))
        ++e.bad;
      e.seen.push_back(i);
    }
  }
  e.stats = l.stats();
  return e;
}

void check(const hdf5_source& src, const std::string& what) {
  const auto want = host_records(src);
  for (const sample_order order :
       {sample_order::sequential, sample_order::shuffled, sample_order::block_shuffled}) {
    const std::string order_name = to_string(order);
    CAPTURE(what);
    CAPTURE(order_name);
    const epoch e = run(src, want, order);
    CHECK(e.bad == 0);
    std::vector<std::uint64_t> seen = e.seen, all(want.size());
    std::sort(seen.begin(), seen.end());
    std::iota(all.begin(), all.end(), 0);
    CHECK(seen == all);
    CHECK(e.stats.device_decode.on);
    CHECK(e.stats.device_decode.device.units > 0);
    CHECK(e.stats.device_decode.device.gathered_bytes > 0);
    CHECK(e.stats.device_decode.batches_redone == 0);
    REQUIRE(e.stats.decode);
    CHECK(e.stats.decode->chunks_decoded == 0);
  }
}

}  // namespace

TEST_CASE("packed shards (LZ4, Bitshuffle + LZ4, deflate) decoded on the GPU in every order") {
  gpufeed::test::temp_dir dir("devdec");
  const auto in = write_inputs(dir / "in", 300);
  for (const char* codec : {"lz4", "bitshuffle-lz4", "deflate:4"}) {
    pack_options o;
    o.compression = parse_compression(codec);
    o.chunk_bytes = 64 << 10;  // records straddle chunks
    o.shard_bytes = 4 << 20;
    const pack_result r = pack(in, dir / codec, o);
    const hdf5_source src(r.shards);
    check(src, codec);
  }
}

TEST_CASE("rows over several chunks, shuffle + deflate + fletcher32, decoded on the GPU") {
  gpufeed::test::temp_dir dir("devdec-rows");
  const fs::path path = dir / "rows.h5";
  std::vector<float> v(300 * 96);
  for (std::size_t k = 0; k < v.size(); ++k) v[k] = static_cast<float>((k * 37) % 1000) / 8;
  {
    gpufeed::test::h5_file f(path);
    gpufeed::test::dataset_spec s;
    s.file_type = H5T_IEEE_F32LE;
    s.mem_type = H5T_NATIVE_FLOAT;
    s.dims = {300, 96};
    s.chunk = {64, 32};  // a row spans three chunks; the last band is partial
    s.shuffle = true;
    s.deflate = 4;
    s.fletcher32 = true;
    f.add(s, v);
  }
  check(hdf5_source(path), "gzip rows");
}

TEST_CASE("a corrupt LZ4 block on the GPU: read again on the host, its error names the record") {
  gpufeed::test::temp_dir dir("devdec-bad");
  const auto in = write_inputs(dir / "in", 60);
  pack_options o;
  o.compression = parse_compression("lz4");
  o.chunk_bytes = 64 << 10;
  o.shuffle = false;
  const pack_result r = pack(in, dir / "lz4", o);
  REQUIRE(r.shards.size() == 1);
  const fs::path shard = r.shards[0];
  // A byte in the middle of the file's second half: inside some chunk's LZ4 payload.
  {
    std::fstream f(shard, std::ios::in | std::ios::out | std::ios::binary);
    const auto size = fs::file_size(shard);
    f.seekg(static_cast<std::streamoff>(size * 3 / 4));
    char b = 0;
    f.read(&b, 1);
    b = static_cast<char>(b ^ 0xff);
    f.seekp(static_cast<std::streamoff>(size * 3 / 4));
    f.write(&b, 1);
  }
  const hdf5_source src(shard);
  // The host path's verdict on every record.
  std::vector<std::uint64_t> host_bad;
  for (std::uint64_t i = 0; i < src.size(); ++i) {
    std::vector<std::byte> buf(src.record_size(i));
    try {
      src.read(i, buf);
    } catch (const corrupt_error&) {
      host_bad.push_back(i);
    }
  }
  loader_config c;
  c.batch_size = 8;
  c.order = sample_order::sequential;
  c.workers = 2;
  c.epochs = 1;
  c.decode = decode_site::device;
  c.on_error = error_policy::skip;
  c.target = cuda::device(0);
  loader<hdf5_source> l(src, c);
  std::vector<std::uint64_t> skipped;
  while (auto b = l.next())
    for (const auto& s : b->skipped()) skipped.push_back(s.index);
  std::sort(skipped.begin(), skipped.end());
  CHECK(skipped == host_bad);
  if (!host_bad.empty()) CHECK(l.stats().device_decode.batches_redone > 0);
}
