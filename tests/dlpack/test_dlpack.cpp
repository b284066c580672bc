// Batches exported as DLPack tensors: shape, strides, dtype and device from the source's record
// layout; the data and labels are the batch's own memory (no copy) holding the bytes the source
// wrote; the batch stays held until the last deleter runs (on any thread), and the loader
// continues after it.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <set>
#include <thread>
#include <vector>

#include "expect_error.hpp"
#include "gpufeed/dlpack.hpp"
#include "gpufeed/hdf5_source.hpp"
#include "gpufeed/loader.hpp"
#include "float_shard.hpp"
#include "memory_source.hpp"
#include "test_util.hpp"

using namespace gpufeed;
using gpufeed::test::float_shard;
using gpufeed::test::label_of;
using gpufeed::test::rows;
using gpufeed::test::value_of;

namespace {

loader_config config(std::size_t batch, std::size_t max_held) {
  loader_config c;
  c.batch_size = batch;
  c.order = sample_order::sequential;
  c.epochs = 1;
  c.part = partition{};
  c.workers = 2;
  c.max_held_batches = max_held;
  return c;
}

std::vector<std::int64_t> vec(const std::int64_t* p, std::int32_t n) { return {p, p + n}; }

}  // namespace

TEST_CASE("dlpack: an HDF5 float32 (N, 3, 4) batch is a (records, 3, 4) float32 tensor, labels int64") {
  float_shard shard;
  hdf5_source src(shard.path);
  const dlpack_layout layout = dlpack_layout_of(src);
  CHECK(layout.fixed);
  CHECK(layout.dtype.code == kDLFloat);
  CHECK(layout.dtype.bits == 32);
  CHECK(layout.record_shape == std::vector<std::int64_t>{3, 4});

  loader<hdf5_source> feed(src, config(8, 2));
  auto b = feed.next();
  REQUIRE(b);
  const void* data = b->data().data();
  const std::vector<std::uint64_t> indices(b->host_indices().begin(), b->host_indices().end());
  const dlpack_tensors t = to_dlpack(std::move(*b), layout);
  CHECK(!b->valid());  // taken by the export
  REQUIRE(t.data);
  REQUIRE(t.labels);

  const DLTensor& x = t.data->dl_tensor;
  CHECK(x.data == data);  // the batch's own memory, not a copy
  CHECK(x.ndim == 3);
  CHECK(vec(x.shape, x.ndim) == std::vector<std::int64_t>{8, 3, 4});
  CHECK(vec(x.strides, x.ndim) == std::vector<std::int64_t>{12, 4, 1});
  CHECK(x.dtype.code == kDLFloat);
  CHECK(x.dtype.bits == 32);
  CHECK(x.dtype.lanes == 1);
  CHECK(x.device.device_type == kDLCPU);
  CHECK(x.device.device_id == 0);
  CHECK(x.byte_offset == 0);
  const auto* f = static_cast<const float*>(x.data);
  for (std::size_t r = 0; r < 8; ++r)
    for (std::size_t k = 0; k < 12; ++k) CHECK(f[r * 12 + k] == value_of(indices[r], k));

  const DLTensor& y = t.labels->dl_tensor;
  CHECK(y.ndim == 1);
  CHECK(y.shape[0] == 8);
  CHECK(y.strides[0] == 1);
  CHECK(y.dtype.code == kDLInt);
  CHECK(y.dtype.bits == 64);
  CHECK(y.device.device_type == kDLCPU);
  for (std::size_t r = 0; r < 8; ++r)
    CHECK(static_cast<const std::int64_t*>(y.data)[r] == label_of(indices[r]));
  t.labels->deleter(t.labels);
  t.data->deleter(t.data);
}

TEST_CASE("dlpack: the batch stays held until the last deleter runs, on another thread; the loader goes on") {
  float_shard shard;
  hdf5_source src(shard.path);
  const dlpack_layout layout = dlpack_layout_of(src);
  loader<hdf5_source> feed(src, config(8, 1));  // one batch out at a time
  std::set<std::uint64_t> seen;
  auto b = feed.next();
  REQUIRE(b);
  for (const auto i : b->host_indices()) seen.insert(i);
  const dlpack_tensors t = to_dlpack(std::move(*b), layout);
  b.reset();
  // Still held: the consumer may not take another batch.
  CHECK(gpufeed::test::has(gpufeed::test::error_of<config_error>([&] { (void)feed.next(); }),
                           "release one"));
  t.labels->deleter(t.labels);  // the data tensor still holds the batch
  CHECK(gpufeed::test::has(gpufeed::test::error_of<config_error>([&] { (void)feed.next(); }),
                           "release one"));
  std::thread([m = t.data] { m->deleter(m); }).join();
  // Released: every other record arrives exactly once, each batch exported and dropped at once.
  while (auto next = feed.next()) {
    for (const auto i : next->host_indices()) CHECK(seen.insert(i).second);
    const dlpack_tensors more = to_dlpack(std::move(*next), layout);
    std::thread([more] {
      more.data->deleter(more.data);
      more.labels->deleter(more.labels);
    }).join();
  }
  CHECK(seen.size() == rows);
}

TEST_CASE("dlpack: records that vary are one uint8 tensor of the data bytes; fixed bytes are (records, bytes)") {
  gpufeed::test::memory_source var(50, 0, 64);
  const dlpack_layout vl = dlpack_layout_of(var);
  CHECK(!vl.fixed);
  loader<gpufeed::test::memory_source> feed(var, config(10, 2));
  auto b = feed.next();
  REQUIRE(b);
  const std::size_t bytes = b->data().size();
  const std::vector<std::uint64_t> offsets(b->host_offsets().begin(), b->host_offsets().end());
  const std::vector<std::uint64_t> indices(b->host_indices().begin(), b->host_indices().end());
  const dlpack_tensors t = to_dlpack(std::move(*b), vl);
  const DLTensor& x = t.data->dl_tensor;
  CHECK(x.ndim == 1);
  CHECK(x.shape[0] == static_cast<std::int64_t>(bytes));
  CHECK(x.strides[0] == 1);
  CHECK(x.dtype.code == kDLUInt);
  CHECK(x.dtype.bits == 8);
  const auto* p = static_cast<const std::byte*>(x.data);
  for (std::size_t r = 0; r < indices.size(); ++r)
    CHECK(var.matches(indices[r], {p + offsets[r], p + offsets[r + 1]}));
  t.data->deleter(t.data);
  t.labels->deleter(t.labels);

  // A fixed layout that is not the batch's records: config_error, and the batch is kept.
  auto c = feed.next();
  REQUIRE(c);
  dlpack_layout wrong;
  wrong.fixed = true;
  wrong.record_shape = {7};
  CHECK(gpufeed::test::has(gpufeed::test::error_of<config_error>([&] { (void)to_dlpack(std::move(*c), wrong); }),
                           "varying size"));
  CHECK(c->valid());

  gpufeed::test::memory_source fixed(20, 24);
  const dlpack_layout fl = dlpack_layout_of(fixed);
  CHECK(fl.fixed);
  CHECK(fl.record_shape == std::vector<std::int64_t>{24});
  loader<gpufeed::test::memory_source> f2(fixed, config(5, 2));
  auto d = f2.next();
  REQUIRE(d);
  const dlpack_tensors u = to_dlpack(std::move(*d), fl);
  CHECK(vec(u.data->dl_tensor.shape, 2) == std::vector<std::int64_t>{5, 24});
  CHECK(vec(u.data->dl_tensor.strides, 2) == std::vector<std::int64_t>{24, 1});
  u.data->deleter(u.data);
  u.labels->deleter(u.labels);
}

TEST_CASE("dlpack: dtype names, byte order suffixes, and a released batch") {
  DLDataType t{};
  CHECK(detail::dlpack::parse_dtype("int16 big-endian", t));
  CHECK((t.code == kDLInt && t.bits == 16 && t.lanes == 1));
  CHECK(detail::dlpack::parse_dtype("uint64", t));
  CHECK((t.code == kDLUInt && t.bits == 64));
  CHECK(detail::dlpack::parse_dtype("float64 little-endian", t));
  CHECK((t.code == kDLFloat && t.bits == 64));
  CHECK(!detail::dlpack::parse_dtype("complex64", t));
  batch none;
  CHECK(gpufeed::test::has(gpufeed::test::error_of<config_error>([&] { (void)to_dlpack(std::move(none), {}); }),
                           "already released"));
}

#if defined(DLPACK_MAJOR_VERSION) && DLPACK_MAJOR_VERSION >= 1
TEST_CASE("dlpack: DLManagedTensorVersioned carries the header's version; labels are read-only") {
  float_shard shard;
  hdf5_source src(shard.path);
  loader<hdf5_source> feed(src, config(8, 1));
  auto b = feed.next();
  REQUIRE(b);
  const dlpack_versioned_tensors t = to_dlpack_versioned(std::move(*b), dlpack_layout_of(src));
  CHECK(t.data->version.major == DLPACK_MAJOR_VERSION);
  CHECK(t.data->flags == 0);
  CHECK(t.labels->flags == DLPACK_FLAG_BITMASK_READ_ONLY);
  CHECK(vec(t.data->dl_tensor.shape, 3) == std::vector<std::int64_t>{8, 3, 4});
  CHECK_THROWS_AS((void)feed.next(), config_error);
  t.data->deleter(t.data);
  t.labels->deleter(t.labels);
  CHECK(feed.next());
}
#endif
