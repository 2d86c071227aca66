// Wall-clock timing helpers (steady clock).
#pragma once
#include <chrono>

namespace tkv {
inline double now_ms() {
  using namespace std::chrono;
  return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}
class Timer {
 public:
  Timer() : start_ms_(now_ms()) {}
  double elapsed_ms() const { return now_ms() - start_ms_; }
  void reset() { start_ms_ = now_ms(); }

 private:
  double start_ms_;
};
}  // namespace tkv
