// libFuzzer target for the eval base-logits cache reader (src/eval/base_logits.h):
// any byte string must open as a checked cache whose records all satisfy the
// reader's promises, or fail with an "[eval] ..." Status; never crash, hang or
// read out of bounds. Input: one control byte, then the file. Control bit 0:
// recompute both checksums first (so mutations reach the checks behind them);
// bit 1: open with a key other than the file's own (the mismatch path).
// Seeds: tests/fuzz/corpus/eval_cache_fuzz (make_eval_cache_seeds.py).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "eval/base_logits.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t control = data[0];
  std::string file(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (control & 1) tkv::eval::reseal_base_logits(&file);
  // The file's own key and vocabulary when its header is long enough to hold them.
  std::string key = "fuzz";
  int32_t n_vocab = 64;
  uint32_t key_len = 0;
  if (file.size() >= 16) std::memcpy(&key_len, file.data() + 12, 4);
  if (file.size() >= 16 + static_cast<size_t>(key_len) + 4 && key_len <= 4096) {
    key.assign(file.data() + 16, key_len);
    std::memcpy(&n_vocab, file.data() + 16 + key_len, 4);
  }
  if (n_vocab <= 0 || n_vocab > (1 << 16)) n_vocab = 64;  // bounded memory per input
  if (control & 2) key += "-other";
  if (file.empty()) file.push_back('\0');  // fmemopen needs a non-empty buffer
  std::FILE* f = fmemopen(file.data(), file.size(), "rb");
  if (!f) return 0;
  auto r = tkv::eval::BaseLogitsReader::open_stream(f, "fuzz", key, n_vocab);
  if (!r.ok()) {
    if (r.status().message().rfind("[eval] fuzz", 0) != 0) std::abort();
    return 0;
  }
  tkv::eval::TruncatedDist d;
  for (int64_t i = 0; i < r.value()->n_positions(); ++i) {
    if (!r.value()->next(&d).ok()) std::abort();  // open() checked every record
    if (d.target < 0 || d.target >= n_vocab || d.ids.size() != d.logp.size()) std::abort();
    for (float lp : d.logp)
      if (!std::isfinite(lp) || lp > tkv::eval::kBaseLogpSlack) std::abort();
  }
  if (r.value()->next(&d).ok()) std::abort();  // no record past the count
  return 0;
}
