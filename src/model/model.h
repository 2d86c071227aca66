// A loaded decoder-only transformer: config, weights (views into the mmapped
// GGUF), and the forward pass that writes K/V through kv::KvCache and attends
// over its page views with ops::attention.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/thread_pool.h"
#include "io/gguf.h"
#include "kernels/matmul/matmul.h"
#include "kvcache/kv_cache.h"
#include "model/batch.h"
#include "model/config.h"
#include "model/device_forward.h"
#include "ops/attention.h"

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

  // One step over a ragged batch: each slice's tokens run at positions
  // [cache.seq_len(seq), +n) and are committed to the cache; the weight matmuls
  // run once over all tokens, attention per slice. Logits land in ws.logits
  // (batch.h). Slices must name distinct sequences. Const: every per-step buffer
  // is in ws, so one Model may serve several workspaces.
  Status forward(const Batch& b, Workspace& ws, kv::KvCache& cache, ThreadPool& pool) const;
  // Key centering (docs/kv-cache.md): with a K bias, store k - b_k instead of k.
  // Every score of a query moves by the same q.b_k, so softmax (attention) is
  // unchanged, while the huge constant bias channels (Qwen2.5: |b_k| up to 354)
  // no longer eat the quantizer's range. No effect on models without K bias.
  void set_key_centering(bool on) { key_center_ = on; }
  bool key_centering_active() const { return key_center_ && cfg_.qkv_bias; }
  // Which attention kernel the forward runs (--kv-attn); under kVerify,
  // attn_check() holds the fused-vs-reference agreement so far (zero otherwise).
  void set_attn_mode(ops::AttnMode m) { attn_mode_ = m; }
  // Where forward() runs. Backend::kCuda uploads the weights and mirrors `cache`'s
  // pools on the GPU (device_forward.h); forward() then accepts that cache only, and
  // its host pools stay unwritten (the host keeps the page bookkeeping). Fails with
  // the reason when CUDA cannot run this model and cache. kCpu drops the device state.
  // With kCuda the cache's page-copy hook copies the device pages too (it shares the
  // device forward, so either may be destroyed first).
  Status set_backend(ops::Backend b, kv::KvCache& cache);
  ops::Backend backend() const { return dev_ ? ops::Backend::kCuda : ops::Backend::kCpu; }
  ops::AttnCheck attn_check() const { return attn_check_.totals(); }

 private:
  Model() = default;
  Status bind_weights();
  Status layer_forward(int il, const Batch& b, Workspace& ws, kv::KvCache& cache,
                       ThreadPool& pool) const;
  void output_logits(const Batch& b, Workspace& ws, ThreadPool& pool) const;

  ModelConfig cfg_;
  std::unique_ptr<io::GgufFile> gguf_;
  Weights w_;
  bool key_center_ = true;
  std::shared_ptr<DeviceForward> dev_;  // set by set_backend(kCuda)
  const kv::KvCache* dev_cache_ = nullptr;
  ops::AttnMode attn_mode_ = ops::AttnMode::kFused;
  mutable ops::AttnCheckLog attn_check_;  // forward is const; the log is thread-safe
};

}  // namespace tkv::model
