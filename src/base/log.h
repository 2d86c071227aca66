// Minimal leveled logging to stderr. TKV_LOG_LEVEL env: 0 error .. 3 debug.
#pragma once
#include <cstdio>
#include <string_view>

#include <fmt/format.h>

namespace tkv {
enum class LogLevel { kError = 0, kWarn = 1, kInfo = 2, kDebug = 3 };
LogLevel log_level();
void set_log_level(LogLevel level);
void log_write(LogLevel level, std::string_view msg);

template <typename... Args>
void log(LogLevel level, fmt::format_string<Args...> f, Args&&... args) {
  if (static_cast<int>(level) > static_cast<int>(log_level())) return;
  log_write(level, fmt::format(f, std::forward<Args>(args)...));
}
}  // namespace tkv

#define TKV_LOG_WARN(...) ::tkv::log(::tkv::LogLevel::kWarn, __VA_ARGS__)
#define TKV_LOG_INFO(...) ::tkv::log(::tkv::LogLevel::kInfo, __VA_ARGS__)
#define TKV_LOG_DEBUG(...) ::tkv::log(::tkv::LogLevel::kDebug, __VA_ARGS__)
#define TKV_LOG_ERROR(...) ::tkv::log(::tkv::LogLevel::kError, __VA_ARGS__)
