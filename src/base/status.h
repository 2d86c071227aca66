// Status and Result<T>: the error type for everything that can fail from
// outside (files, flags, requests, memory). The types are the public API's
// (include/turbokv/status.h); this header adds the fmt-based constructors and
// the propagation macros the engine's code uses.
#pragma once
#include <cstdio>
#include <optional>
#include <string>
#include <utility>
#include <variant>

#include <fmt/format.h>

#include "turbokv/status.h"

namespace tkv {

template <typename... Args>
Status make_error(StatusCode code, fmt::format_string<Args...> f, Args&&... args) {
  return Status(code, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
Status invalid_argument(fmt::format_string<Args...> f, Args&&... args) {
  return Status(StatusCode::kInvalidArgument, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
Status data_loss(fmt::format_string<Args...> f, Args&&... args) {
  return Status(StatusCode::kDataLoss, fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace tkv

#define TKV_CONCAT_INNER(a, b) a##b
#define TKV_CONCAT(a, b) TKV_CONCAT_INNER(a, b)

// Propagate a non-OK Status from the current function.
#define TKV_RETURN_IF_ERROR(expr)      \
  do {                                 \
    ::tkv::Status _tkv_st = (expr);    \
    if (!_tkv_st.ok()) return _tkv_st; \
  } while (0)

// auto x = TKV_TRY(result_expr); — unwraps a Result or returns its Status.
#define TKV_ASSIGN_OR_RETURN(lhs, expr)                                                   \
  auto TKV_CONCAT(_tkv_r_, __LINE__) = (expr);                                            \
  if (!TKV_CONCAT(_tkv_r_, __LINE__).ok()) return TKV_CONCAT(_tkv_r_, __LINE__).status(); \
  lhs = std::move(TKV_CONCAT(_tkv_r_, __LINE__)).value()
