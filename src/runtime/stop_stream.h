// Streams generated text to a sink while watching for stop strings: text that
// could still be the start of a stop string is held back, so the output ends
// exactly before the first stop string found. Used by the engine loop for a
// request's stop strings and by the CLI.
#pragma once
#include <algorithm>
#include <functional>
#include <string>
#include <vector>

namespace tkv::runtime {

class StopStream {
 public:
  StopStream(std::vector<std::string> stops, std::function<void(const std::string&)> sink)
      : stops_(std::move(stops)), sink_(std::move(sink)) {
    stops_.erase(std::remove(stops_.begin(), stops_.end(), std::string()), stops_.end());
    for (const auto& s : stops_) hold_ = std::max(hold_, s.size() - 1);
  }
  // Adds a piece; returns false once a stop string has been seen (nothing after it is sent).
  bool add(const std::string& piece) {
    pending_ += piece;
    size_t cut = std::string::npos;
    for (const auto& s : stops_) cut = std::min(cut, pending_.find(s));
    if (cut != std::string::npos) {
      emit(cut);
      pending_.clear();
      stopped_ = true;
      return false;
    }
    if (pending_.size() > hold_) emit(pending_.size() - hold_);
    return true;
  }
  // Sends what was held back (generation ended without a stop string).
  void flush() { emit(pending_.size()); }
  bool stopped() const { return stopped_; }

 private:
  void emit(size_t n) {
    if (n == 0) return;
    sink_(pending_.substr(0, n));
    pending_.erase(0, n);
  }
  std::vector<std::string> stops_;
  std::function<void(const std::string&)> sink_;
  std::string pending_;
  size_t hold_ = 0;
  bool stopped_ = false;
};

}  // namespace tkv::runtime
