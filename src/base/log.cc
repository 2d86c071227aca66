// Logging sink: one line per message, prefixed with the level.
#include "base/log.h"

#include <atomic>
#include <cstdlib>
#include <mutex>

namespace tkv {
namespace {
std::atomic<int> g_level{-1};
std::mutex g_mu;
}  // namespace

LogLevel log_level() {
  int l = g_level.load(std::memory_order_relaxed);
  if (l < 0) {
    const char* e = std::getenv("TKV_LOG_LEVEL");
    l = e ? std::atoi(e) : 1;
    g_level.store(l, std::memory_order_relaxed);
  }
  return static_cast<LogLevel>(l);
}
void set_log_level(LogLevel level) {
  g_level.store(static_cast<int>(level));
}

void log_write(LogLevel level, std::string_view msg) {
  static const char* kNames[] = {"error", "warn", "info", "debug"};
  std::lock_guard<std::mutex> lock(g_mu);
  std::fprintf(stderr, "%s: %.*s\n", kNames[static_cast<int>(level)], static_cast<int>(msg.size()),
               msg.data());
}
}  // namespace tkv
