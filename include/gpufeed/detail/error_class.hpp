// gpufeed — an error's class as a type: a typed error made again with another context or message
// keeps the class the caller catches by (a corrupt_error named after its record is still a
// corrupt_error, not a gpufeed::error).
#pragma once

#include <exception>
#include <type_traits>
#include <utility>

#include "gpufeed/error.hpp"

namespace gpufeed::detail {

// f(std::type_identity<E>{}) with E the most derived of gpufeed's error classes that `x` is
// (gpufeed::error for an error of no other class, or of a class of the caller's own), and what
// f returns.
template <class F>
decltype(auto) with_error_class(const error& x, F&& f) {
  if (dynamic_cast<const io_error*>(&x)) return f(std::type_identity<io_error>{});
  if (dynamic_cast<const format_error*>(&x)) return f(std::type_identity<format_error>{});
  if (dynamic_cast<const corrupt_error*>(&x)) return f(std::type_identity<corrupt_error>{});
  if (dynamic_cast<const unsupported_error*>(&x)) return f(std::type_identity<unsupported_error>{});
  if (dynamic_cast<const library_error*>(&x)) return f(std::type_identity<library_error>{});
  if (dynamic_cast<const cuda_error*>(&x)) return f(std::type_identity<cuda_error>{});
  if (dynamic_cast<const cancelled_error*>(&x)) return f(std::type_identity<cancelled_error>{});
  if (dynamic_cast<const config_error*>(&x)) return f(std::type_identity<config_error>{});
  return f(std::type_identity<error>{});
}

// `x` again, of its class and with its message, naming `c` instead of its own context.
[[nodiscard]] inline std::exception_ptr with_context(const error& x, error_context c) {
  return with_error_class(x, [&]<class E>(std::type_identity<E>) {
    return std::make_exception_ptr(E(x.message(), std::move(c)));
  });
}

}  // namespace gpufeed::detail
