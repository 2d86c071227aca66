// Base-logits file: the bf16-KV next-token distributions of one evaluation,
// written once and reused by every scheme of that evaluation (and by later runs).
// It is a cache: anything wrong with it (missing, corrupt, made for another model,
// corpus or setting) makes the reader fail, and the caller recomputes it.
// Format (little endian), documented in docs/eval/README.md:
//   header:  "TKVBASE\0" | u32 version (2) | u32 key_len (<= 4096) | key bytes
//            | i32 n_vocab | i32 k_min | i32 k_max | u32 0 | f64 mass | i64 n_positions
//            | u64 payload XXH3-64 | u64 header XXH3-64 (over every header byte before it)
//   payload: n_positions records: i32 target, i32 argmax, f32 target_logp, f64 tail_mass,
//            u32 k, i32 ids[k], f32 logp[k]   (see TruncatedDist in kl.h)
// The key names the model and corpus by content hash (hash_file) plus every setting.
#pragma once
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "eval/kl.h"

namespace tkv::eval {

// Sum of exp(logp) over a record plus its tail mass must be within this of 1.
inline constexpr double kBaseMassTolerance = 1e-3;
// Largest log-probability accepted (fp32 rounding of log p for p = 1).
inline constexpr double kBaseLogpSlack = 1e-4;

// XXH3-64 of a file's bytes (the model's identity in the key).
Result<uint64_t> hash_file(const std::string& path);
// XXH3-64 of a byte string.
uint64_t hash_bytes(const std::string& bytes);

// Writes to a temporary file in the destination's folder and, on finish(), fsyncs
// it, renames it over <path> and fsyncs the folder, so a partial or torn file
// never passes for a base. Without finish() the temporary file is removed.
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
  std::string path_, tmp_, key_;
  int n_vocab_ = 0;
  TruncationParams tp_;
  std::FILE* f_ = nullptr;
  void* hash_ = nullptr;  // XXH3_state_t over the payload
  int64_t n_ = 0;
};

class BaseLogitsReader {
 public:
  // Reads and checks the whole file before returning: kNotFound if missing,
  // kDataLoss naming the first problem (bad magic or version, truncation, checksum,
  // out-of-range field, impossible probabilities), kInvalidArgument if it was made
  // for another key or vocabulary.
  static Result<std::unique_ptr<BaseLogitsReader>> open(const std::string& path,
                                                        const std::string& key, int n_vocab);
  // The same over an open stream (takes ownership; `name` is used in messages).
  static Result<std::unique_ptr<BaseLogitsReader>> open_stream(std::FILE* f,
                                                               const std::string& name,
                                                               const std::string& key, int n_vocab);
  ~BaseLogitsReader();
  Status next(TruncatedDist* d);
  int64_t n_positions() const { return n_; }
  int64_t bytes() const { return bytes_; }

 private:
  BaseLogitsReader() = default;
  Status read_record(TruncatedDist* d, int64_t i);
  std::FILE* f_ = nullptr;
  std::string name_;
  int n_vocab_ = 0;
  int64_t n_ = 0, read_ = 0, bytes_ = 0, payload_offset_ = 0;
  std::vector<uint8_t> mark_;
};

// Recomputes both checksums of an in-memory base file whose header parses as far as
// the key (tests and the fuzzer use it to reach the checks behind the checksums).
// Returns false when the bytes are too short to hold a header.
bool reseal_base_logits(std::string* bytes);

}  // namespace tkv::eval
