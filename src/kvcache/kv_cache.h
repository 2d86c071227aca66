// The one KV-cache interface every architecture writes to and attends through.
// A forward pass over n new tokens of a sequence calls reserve() once, then
// write() + attend() per layer, then commit(). Implementations (bf16, affine,
// TurboQuant) own their page pools; PageTable does the host bookkeeping.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/thread_pool.h"
#include "kernels/attention/attention.h"

namespace tkv::kv {

struct KvShape {
  int n_layers = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  std::vector<int64_t> layer_window;  // [n_layers] 0 = full attention, else sliding window size
};

struct CacheOptions {
  std::string scheme = "bf16";  // as given to --kv-quant
  int page_size = 64;           // tokens per page
  int64_t max_tokens = 4096;    // pool capacity in tokens (all sequences together)
  int max_seqs = 8;
};

class KvCache {
 public:
  virtual ~KvCache() = default;

  virtual Result<int> create_seq() = 0;
  virtual void free_seq(int seq) = 0;
  virtual Result<int> fork_seq(int src) = 0;
  virtual int64_t seq_len(int seq) const = 0;
  virtual void trim_seq(int seq, int64_t n_tokens) = 0;

  // Allocates room for n_new tokens after seq_len(seq); fails when full.
  virtual Status reserve(int seq, int64_t n_new) = 0;
  // k, v: [n_tokens, n_kv_heads, head_dim] fp32 for positions [pos0, pos0 + n_tokens).
  virtual void write(int layer, int seq, int64_t pos0, int64_t n_tokens, const float* k, const float* v) = 0;
  // Causal attention of a.n_q queries at a.q_pos0.. over everything written so
  // far for (layer, seq), including this pass's write().
  virtual void attend(int layer, int seq, const kernels::AttnArgs& a, ThreadPool& pool) = 0;
  virtual void commit(int seq, int64_t n_new) = 0;

  virtual const KvShape& shape() const = 0;
  virtual std::string scheme_name() const = 0;
  // Bytes one token occupies over all layers and kv heads.
  virtual size_t bytes_per_token() const = 0;
  // Bytes actually allocated for pools (measured from the allocations).
  virtual size_t allocated_bytes() const = 0;
  virtual int64_t capacity_tokens() const = 0;
};

// Builds the cache named by opts.scheme for the given model shape.
Result<std::unique_ptr<KvCache>> create_cache(const KvShape& shape, const CacheOptions& opts);

}  // namespace tkv::kv
