// Status and Result<T>: the error type for everything that can fail from
// outside (files, flags, requests, memory). Messages start with the component,
// e.g. "[gguf] tensor 'x' offset past end of file".
#pragma once
#include <cstdio>
#include <optional>
#include <string>
#include <utility>
#include <variant>

#include <fmt/format.h>

namespace tkv {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,
  kNotFound,
  kOutOfRange,
  kDataLoss,
  kUnimplemented,
  kResourceExhausted,
  kInternal,
  kIo
};

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string msg) : code_(code), msg_(std::move(msg)) {}
  static Status ok_status() { return {}; }
  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return msg_; }
  std::string to_string() const { return ok() ? std::string("OK") : msg_; }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string msg_;
};

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

// Result<T>: a value or a non-OK Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}        // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {  // NOLINT
    if (std::get<Status>(v_).ok())
      v_ = Status(StatusCode::kInternal, "[base] Result built from OK status");
  }
  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }

 private:
  std::variant<T, Status> v_;
};

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
