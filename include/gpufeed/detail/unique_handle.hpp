// gpufeed::detail — unique_handle: the one move-only owner of a C library handle (CUDA streams,
// events and allocations; LMDB environments and cursors; HDF5 identifiers).
//
//   struct stream_close { void operator()(cudaStream_t s) const noexcept { ... } };
//   detail::unique_handle<cudaStream_t, stream_close> s_;   // null: cudaStream_t{}
//
// The null value is T{} unless Close has a `static constexpr T null` (HDF5: H5I_INVALID_HID).
//
// Contracts: move construction leaves the source null; move assignment swaps, so the source's
// destructor releases what this object held (one code path for every release); the destructor
// calls Close only on a non-null value and never throws (Close must be noexcept: a CUDA closer
// logs a failure, and ignores cudaErrorCudartUnloading at process exit). Close may carry state
// (HDF5's closer is the H5?close function that fits the identifier); it moves with the value.
#pragma once

#include <type_traits>
#include <utility>

namespace gpufeed::detail {

template <class T, class Close>
class unique_handle {
  static_assert(std::is_nothrow_invocable_v<const Close&, T>,
                "a handle's closer must be noexcept: destructors never throw");
  static constexpr T Null = [] {
    if constexpr (requires { Close::null; })
      return T(Close::null);
    else
      return T{};
  }();

 public:
  unique_handle() noexcept = default;
  explicit unique_handle(T value, Close close = Close{}) noexcept
      : value_(value), close_(std::move(close)) {}
  unique_handle(unique_handle&& o) noexcept
      : value_(std::exchange(o.value_, Null)), close_(std::move(o.close_)) {}
  unique_handle& operator=(unique_handle&& o) noexcept {
    std::swap(value_, o.value_);
    std::swap(close_, o.close_);
    return *this;
  }
  unique_handle(const unique_handle&) = delete;
  unique_handle& operator=(const unique_handle&) = delete;
  ~unique_handle() { reset(); }

  [[nodiscard]] T get() const noexcept { return value_; }
  [[nodiscard]] bool valid() const noexcept { return value_ != Null; }
  // Where a C API writes a new handle (cudaStreamCreate(&h)); the current one is released first.
  [[nodiscard]] T* out() noexcept {
    reset();
    return &value_;
  }
  // Gives up ownership without closing.
  [[nodiscard]] T release() noexcept { return std::exchange(value_, Null); }
  void reset() noexcept {
    if (value_ != Null) close_(std::exchange(value_, Null));
  }

 private:
  T value_ = Null;
  [[no_unique_address]] Close close_{};
};

}  // namespace gpufeed::detail
