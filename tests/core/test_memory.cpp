#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "gpufeed/memory.hpp"

using namespace gpufeed;

TEST_CASE("pageable_resource honours alignment (at least a cache line)") {
  auto* mr = pageable_resource::instance();
  for (std::size_t align : {1u, 8u, 64u, 4096u}) {
    void* p = mr->allocate(1000, align);
    CHECK(reinterpret_cast<std::uintptr_t>(p) % std::max<std::size_t>(align, 64) == 0);
    std::memset(p, 0xab, 1000);
    mr->deallocate(p, 1000, align);
  }
  CHECK(mr->is_equal(*pageable_resource::instance()));
}

TEST_CASE("counting_resource counts bytes in use, peak and calls") {
  counting_resource counting;
  {
    resource_buffer a(&counting, 1 << 20);
    resource_buffer b(&counting, 4096);
    CHECK(counting.bytes_in_use() == (1u << 20) + 4096);
    CHECK(counting.allocations() == 2);
    resource_buffer moved = std::move(a);
    CHECK(a.data() == nullptr);
    CHECK(moved.size() == 1u << 20);
    CHECK(counting.bytes_in_use() == (1u << 20) + 4096);  // a move allocates nothing
  }
  CHECK(counting.bytes_in_use() == 0);
  CHECK(counting.peak_bytes() == (1u << 20) + 4096);
  CHECK(counting.deallocations() == 2);
}

TEST_CASE("counting_resource is thread-safe") {
  counting_resource counting;
  {
    std::vector<std::jthread> threads;
    for (int t = 0; t < 8; ++t)
      threads.emplace_back([&] {
        for (int i = 0; i < 2000; ++i) resource_buffer b(&counting, 64 + i % 7);
      });
  }
  CHECK(counting.allocations() == 16000);
  CHECK(counting.deallocations() == 16000);
  CHECK(counting.bytes_in_use() == 0);
}

TEST_CASE("resource_buffer works with std::pmr containers' resources") {
  counting_resource counting;
  {
    std::pmr::vector<int> v(&counting);
    v.resize(1000);
    CHECK(counting.bytes_in_use() >= 4000);
  }
  CHECK(counting.bytes_in_use() == 0);
  resource_buffer empty(&counting, 0);
  CHECK(empty.data() == nullptr);
  CHECK(counting.allocations() >= 1);
}
