// Base-logits file: the bf16-KV next-token distributions of one evaluation,
// written once and reused by every scheme of that evaluation (and by later runs).
// Format (little endian), documented in docs/eval/README.md:
//   "TKVBASE1" | uint32 header_len | header JSON
//   {"key":..,"n_vocab":..,"n_positions":..,"truncation":{..}} then n_positions records: int32
//   target, int32 argmax, float target_logp, double tail_mass, uint32 k, int32 ids[k], float
//   logp[k]   (see TruncatedDist in kl.h).
#pragma once
#include <cstdio>
#include <memory>
#include <string>

#include "base/status.h"
#include "eval/kl.h"

namespace tkv::eval {

// Writes to <path>.tmp and renames to <path> on finish(), so a partial file never passes for a
// base.
class BaseLogitsWriter {
 public:
  static Result<std::unique_ptr<BaseLogitsWriter>> create(const std::string& path,
                                                          const std::string& key, int n_vocab,
                                                          const TruncationParams& tp);
  ~BaseLogitsWriter();
  Status append(const TruncatedDist& d);
  Status finish();
  int64_t n_positions() const { return n_; }

 private:
  BaseLogitsWriter() = default;
  std::string path_, key_;
  int n_vocab_ = 0;
  TruncationParams tp_;
  std::FILE* f_ = nullptr;
  int64_t n_ = 0;
};

class BaseLogitsReader {
 public:
  // Fails (kNotFound / kDataLoss / kInvalidArgument) if missing, corrupt, or made with another key.
  static Result<std::unique_ptr<BaseLogitsReader>> open(const std::string& path,
                                                        const std::string& key, int n_vocab);
  ~BaseLogitsReader();
  Status next(TruncatedDist* d);
  int64_t n_positions() const { return n_; }
  int64_t bytes() const { return bytes_; }

 private:
  BaseLogitsReader() = default;
  std::FILE* f_ = nullptr;
  int n_vocab_ = 0;
  int64_t n_ = 0, read_ = 0, bytes_ = 0;
};

}  // namespace tkv::eval
