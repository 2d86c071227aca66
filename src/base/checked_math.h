// Overflow-checked integer arithmetic for sizes derived from outside input
// (file headers, flags). Each helper returns false instead of wrapping, so a
// caller turns the overflow into a Status naming the values.
#pragma once
#include <cstdint>
#include <type_traits>

namespace tkv {

template <typename T>
[[nodiscard]] inline bool checked_mul(T a, T b, T* out) {
  static_assert(std::is_integral_v<T>);
  return !__builtin_mul_overflow(a, b, out);
}

template <typename T>
[[nodiscard]] inline bool checked_add(T a, T b, T* out) {
  static_assert(std::is_integral_v<T>);
  return !__builtin_add_overflow(a, b, out);
}

// ceil(a / b) for a >= 0, b > 0 without forming a + b - 1.
[[nodiscard]] inline int64_t ceil_div_nonneg(int64_t a, int64_t b) {
  return a / b + (a % b != 0 ? 1 : 0);
}

}  // namespace tkv
