// Byte layout of the base-logits header (base_logits.h), shared by the writer and
// the reader. Internal to src/eval.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

namespace tkv::eval::base_format {

inline constexpr char kMagic[8] = {'T', 'K', 'V', 'B', 'A', 'S', 'E', '\0'};
inline constexpr uint32_t kVersion = 2;
inline constexpr uint32_t kMaxKey = 4096;
// magic, version, key_len.
inline constexpr size_t kFixedPrefix = 16;
// After the key: n_vocab, k_min, k_max, reserved, mass, n_positions, payload hash, header hash.
inline constexpr size_t kFixedSuffix = 4 * 4 + 8 * 4;
// Smallest record: target, argmax, target_logp, tail_mass, k (k = 0).
inline constexpr int64_t kMinRecord = 4 + 4 + 4 + 8 + 4;

inline size_t header_size(uint32_t key_len) {
  return kFixedPrefix + key_len + kFixedSuffix;
}

struct Header {
  std::string key;
  int32_t n_vocab = 0, k_min = 0, k_max = 0;
  double mass = 0;
  int64_t n_positions = 0;
  uint64_t payload_hash = 0;
};

template <typename T>
void append_pod(std::string* out, const T& v) {
  out->append(reinterpret_cast<const char*>(&v), sizeof(T));
}

std::string encode_header(const Header& h);

// XXH3-64 of the rest of f (from its current position); *read_error set on a read error.
uint64_t hash_stream(std::FILE* f, bool* read_error);

}  // namespace tkv::eval::base_format
