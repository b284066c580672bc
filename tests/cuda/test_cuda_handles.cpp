// CUDA owners on a real device: copies round-trip, moves transfer ownership, errors are typed.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <utility>
#include <numeric>
#include <vector>

#include "gpufeed/cuda/check.hpp"
#include "gpufeed/cuda/device.hpp"
#include "gpufeed/cuda/device_buffer.hpp"
#include "gpufeed/cuda/event.hpp"
#include "gpufeed/cuda/pinned.hpp"
#include "gpufeed/cuda/stream.hpp"
#include "gpufeed/memory.hpp"

using namespace gpufeed;

TEST_CASE("device properties") {
  const auto p = cuda::properties(0);
  CHECK_FALSE(p.name.empty());
  CHECK(p.total_memory > 0);
  CHECK(p.async_engines >= 1);
  MESSAGE(p.name << ", " << p.total_memory / (1 << 20) << " MiB, cc " << p.compute_major << "."
                 << p.compute_minor << ", copy engines " << p.async_engines << ", bus "
                 << p.pci_bus_id);
  CHECK_THROWS_AS(cuda::properties(9999), cuda_error);
}

TEST_CASE("pinned -> device -> pinned round trip is byte exact") {
  constexpr std::size_t n = 8 << 20;
  cuda::pinned_buffer src(n), back(n);
  cuda::device_buffer dev(n);
  auto* s = reinterpret_cast<unsigned char*>(src.data());
  for (std::size_t i = 0; i < n; ++i) s[i] = static_cast<unsigned char>(i * 2654435761u >> 24);
  std::memset(back.data(), 0, n);
  cuda::stream st;
  cuda::event done;
  GPUFEED_CUDA_TRY(cudaMemcpyAsync(dev.data(), src.data(), n, cudaMemcpyHostToDevice, st));
  GPUFEED_CUDA_TRY(cudaMemcpyAsync(back.data(), dev.data(), n, cudaMemcpyDeviceToHost, st));
  done.record(st);
  done.synchronize();
  CHECK(done.ready());
  CHECK(st.idle());
  CHECK(std::memcmp(src.data(), back.data(), n) == 0);
}

TEST_CASE("moves transfer ownership; moved-from owners are empty") {
  cuda::stream a;
  cudaStream_t raw = a.get();
  cuda::stream b(std::move(a));
  CHECK(b.get() == raw);
  CHECK(a.get() == nullptr);
  cuda::stream c;
  c = std::move(b);  // c's old stream is released by b's destructor
  CHECK(c.get() == raw);

  cuda::device_buffer d(1024);
  std::byte* p = d.data();
  cuda::device_buffer e = std::move(d);
  CHECK(e.data() == p);
  CHECK(d.data() == nullptr);
  CHECK(d.size() == 0);

  cuda::event ev;
  cuda::event ev2 = std::move(ev);
  CHECK(ev.get() == nullptr);
  CHECK(ev2.get() != nullptr);

  cuda::pinned_buffer pb(4096);
  cuda::pinned_buffer pb2 = std::move(pb);
  CHECK(pb.data() == nullptr);
  CHECK(pb2.size() == 4096);
}

TEST_CASE("timing events measure a copy") {
  constexpr std::size_t n = 64 << 20;
  cuda::pinned_buffer src(n);
  cuda::device_buffer dev(n);
  cuda::stream st;
  cuda::event t0(cuda::event::timing::enabled), t1(cuda::event::timing::enabled);
  t0.record(st);
  GPUFEED_CUDA_TRY(cudaMemcpyAsync(dev.data(), src.data(), n, cudaMemcpyHostToDevice, st));
  t1.record(st);
  t1.synchronize();
  const float ms = cuda::event::elapsed_ms(t0, t1);
  CHECK(ms > 0.0f);
  MESSAGE("64 MiB pinned H2D: " << (n / 1e6) / ms << " GB/s");
}

TEST_CASE("a failed call throws cuda_error and does not poison the next call") {
  cuda::device_buffer dev(16);
  // A null host source is an invalid argument.
  CHECK_THROWS_AS(GPUFEED_CUDA_TRY(cudaMemcpy(dev.data(), nullptr, 16, cudaMemcpyHostToDevice)),
                  cuda_error);
  CHECK(cudaPeekAtLastError() == cudaSuccess);
  std::vector<std::byte> host(16);
  CHECK_NOTHROW(GPUFEED_CUDA_TRY(cudaMemcpy(dev.data(), host.data(), 16, cudaMemcpyHostToDevice)));
}

TEST_CASE("pinned_resource through std::pmr and the counting wrapper") {
  counting_resource counting(cuda::pinned_resource::instance());
  {
    resource_buffer b(&counting, 1 << 20, 4096);
    cudaPointerAttributes attr{};
    GPUFEED_CUDA_TRY(cudaPointerGetAttributes(&attr, b.data()));
    CHECK(attr.type == cudaMemoryTypeHost);
    CHECK(counting.bytes_in_use() == 1u << 20);
  }
  CHECK(counting.bytes_in_use() == 0);
  CHECK(cuda::pinned_resource::instance()->is_equal(*cuda::pinned_resource::instance()));
}

TEST_CASE("pinned_resource meets page alignment although cudaMallocHost sub-allocates") {
  auto* mr = cuda::pinned_resource::instance();
  for (std::size_t k = 0; k < 64; ++k) {
    const std::size_t align = k % 2 ? 4096 : 256;
    const std::size_t bytes = 1000 + 37 * k;
    void* p = mr->allocate(bytes, align);
    CHECK(reinterpret_cast<std::uintptr_t>(p) % align == 0);
    cudaPointerAttributes attr{};
    GPUFEED_CUDA_TRY(cudaPointerGetAttributes(&attr, p));
    CHECK(attr.type == cudaMemoryTypeHost);
    std::memset(p, 0x5a, bytes);
    mr->deallocate(p, bytes, align);
  }
}
