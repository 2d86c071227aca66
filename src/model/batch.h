// One forward step over many sequences: a ragged batch of token slices (a
// decode token, a prefill chunk, a teacher-forced span) and the scratch the
// step needs. The weight matmuls run once over every token of the batch;
// attention runs per slice over that sequence's own KV pages.
#pragma once
#include <cstdint>
#include <vector>

#include "kernels/attention/attention.h"
#include "kernels/attention/kv_page.h"

namespace tkv::model {

// Which logits a slice wants back.
enum class LogitsWanted : uint8_t {
  kNone,  // a prefill chunk that is not the prompt's last
  kLast,  // the next-token distribution (decode, last prefill chunk)
  kAll,   // every position (scoring, eval)
};

// n tokens of KV sequence `seq`, at positions [cache.seq_len(seq), +n); the
// tokens are Batch::tokens[first, first + n).
struct BatchSlice {
  int seq = -1;
  int64_t first = 0;
  int64_t n = 0;
  LogitsWanted logits = LogitsWanted::kLast;
};

struct Batch {
  std::vector<int32_t> tokens;
  std::vector<BatchSlice> slices;

  // Appends a slice for seq; its tokens go to the end of `tokens`.
  void add(int seq, const int32_t* toks, int64_t n, LogitsWanted w) {
    slices.push_back({seq, static_cast<int64_t>(tokens.size()), n, w});
    tokens.insert(tokens.end(), toks, toks + n);
  }
  void clear() {
    tokens.clear();
    slices.clear();
  }
  int64_t n_tokens() const { return static_cast<int64_t>(tokens.size()); }
};

// Scratch of a forward step, grown on demand and reused across steps (one per
// engine thread; Model itself holds no per-step state). After forward(),
// logits holds one row of n_vocab floats per wanted position, slice by slice
// in batch order; logits_row[i] is slice i's first row (-1 for kNone).
struct Workspace {
  std::vector<float> x, h, q, k, v, attn, ff_gate, ff_up, tmp;
  std::vector<int32_t> pos;
  std::vector<float> logits;
  std::vector<int64_t> logits_row;
  std::vector<kernels::AttnArgs> attn_args;  // one attention call per slice of the step
  std::vector<kernels::KvView> attn_views;
  double attention_ms = 0;  // wall time of KV writes + ops::attention, summed until reset

  const float* slice_logits(size_t slice, int64_t n_vocab) const {
    return logits.data() + logits_row[slice] * n_vocab;
  }
};

}  // namespace tkv::model
