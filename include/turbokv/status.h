// turbokv::Status and turbokv::Result<T>: the error type of the public API and of
// the engine's own code alike (src/base/status.h adds the fmt-based helpers).
// Messages start with the component, e.g. "[gguf] tensor 'x' offset past end of
// file". The types live in namespace tkv, the engine's namespace, so internal
// forward declarations stay valid; turbokv:: names the same types.
#pragma once
#include <string>
#include <utility>
#include <variant>

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

namespace turbokv {
using tkv::Result;
using tkv::Status;
using tkv::StatusCode;
}  // namespace turbokv
