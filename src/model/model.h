// A loaded decoder-only transformer: config, weights (views into the mmapped
// GGUF), and the forward pass that reads/writes K/V through kv::KvCache.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/thread_pool.h"
#include "io/gguf.h"
#include "kernels/matmul/matmul.h"
#include "kvcache/kv_cache.h"
#include "model/config.h"

namespace tkv::model {

struct LayerWeights {
  kernels::WeightView wq, wk, wv, wo;  // [n_heads*head_dim, d_model] etc. (ggml rows = outputs)
  kernels::WeightView w_gate, w_up, w_down;  // [d_ff, d_model], [d_ff, d_model], [d_model, d_ff]
  std::vector<float> attn_norm, ffn_norm;    // [d_model]
  std::vector<float> post_attn_norm, post_ffn_norm;  // [d_model] (Gemma)
  std::vector<float> q_norm, k_norm;                 // [head_dim] (Gemma)
  std::vector<float> bq, bk, bv;  // [n_heads*head_dim], [n_kv_heads*head_dim] (Qwen2)
  std::vector<float> k_center;    // -bk: added to roped keys when key centering is on
};

struct Weights {
  kernels::WeightView tok_embd;  // [n_vocab, d_model]
  kernels::WeightView output;    // [n_vocab, d_model] (tok_embd when tied)
  std::vector<float> output_norm;
  std::vector<LayerWeights> layers;
};

class Model {
 public:
  // Loads the GGUF at path: architecture lookup, hparams, every tensor checked
  // for presence, type support and shape.
  static Result<std::unique_ptr<Model>> load(const std::string& path);

  const ModelConfig& config() const { return cfg_; }
  const io::GgufFile& gguf() const { return *gguf_; }
  kv::KvShape kv_shape() const;
  // Bytes of weights read per decoded token (all matrices once + one embedding row).
  size_t weight_bytes_per_token() const;

  // Runs n tokens of sequence `seq` at positions [seq_len, seq_len + n) and
  // commits them to the cache. logits: [n_out, n_vocab] where n_out = n if
  // all_logits else 1 (the last token).
  Status forward(kv::KvCache& cache, int seq, const int32_t* tokens, int64_t n, bool all_logits,
                 float* logits, ThreadPool& pool);
  // Wall time spent inside KvCache::attend since the last reset (for bench's
  // attention-only figure; two clock reads per layer).
  double attention_ms() const { return attn_ms_; }
  // Key centering (docs/kv-cache.md): with a K bias, store k - b_k instead of k.
  // Every score of a query moves by the same q.b_k, so softmax (attention) is
  // unchanged, while the huge constant bias channels (Qwen2.5: |b_k| up to 354)
  // no longer eat the quantizer's range. No effect on models without K bias.
  void set_key_centering(bool on) { key_center_ = on; }
  bool key_centering_active() const { return key_center_ && cfg_.qkv_bias; }
  void reset_attention_ms() { attn_ms_ = 0; }

 private:
  Model() = default;
  Status bind_weights();
  void layer_forward(int il, kv::KvCache& cache, int seq, int64_t pos0, int64_t n,
                     ThreadPool& pool);

  ModelConfig cfg_;
  std::unique_ptr<io::GgufFile> gguf_;
  Weights w_;
  // Scratch activations, grown on demand: [n, d_model] etc.
  std::vector<float> x_, h_, q_, k_, v_, attn_, ff_gate_, ff_up_, tmp_;
  std::vector<int32_t> pos_;
  double attn_ms_ = 0;
  bool key_center_ = true;
};

}  // namespace tkv::model
