// Model hyper-parameters as read from GGUF metadata by an architecture file.
// One vocabulary for dimensions (n_layers, n_heads, n_kv_heads, head_dim, d_model, d_ff, n_vocab).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/nn/nn.h"

namespace tkv::model {

// Bounds on hyper-parameters read from a file: far above any supported model,
// low enough that every size derived from them fits in int64 (and scratch in RAM).
constexpr int64_t kMaxLayers = 1024;
constexpr int64_t kMaxDim = 1 << 17;      // d_model, d_ff
constexpr int64_t kMaxHeads = 1024;       // n_heads, n_kv_heads
constexpr int64_t kMaxHeadDim = 512;      // the KV cache's limit too
constexpr int64_t kMaxVocab = 1 << 22;    // n_vocab
constexpr int64_t kMaxContext = 1 << 24;  // n_ctx_train and sliding windows

enum class FfnAct { kSilu, kGeluTanh };

struct ModelConfig {
  std::string arch;  // GGUF general.architecture
  std::string name;  // general.name
  int n_layers = 0;
  int d_model = 0;
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  int d_ff = 0;
  int n_vocab = 0;
  int64_t n_ctx_train = 0;
  float rms_eps = 1e-5f;
  int n_rot = 0;  // rotated dims per head
  kernels::RopeMode rope_mode = kernels::RopeMode::kNorm;
  float rope_freq_scale = 1.0f;
  std::vector<float> layer_rope_base;  // [n_layers]
  std::vector<int64_t> layer_window;   // [n_layers] 0 = global attention
  bool qkv_bias = false;               // Qwen2
  bool qk_norm = false;                // Gemma 3: RMSNorm per head on Q and K
  bool post_norms = false;             // Gemma 3: norm after attention and after FFN
  FfnAct ffn_act = FfnAct::kSilu;
  float embed_scale = 1.0f;  // Gemma: sqrt(d_model)
  float attn_scale = 0.0f;   // 0 = 1/sqrt(head_dim)
  float final_logit_softcap = 0.0f;
  bool q_dim_is_d_model = true;  // n_heads * head_dim == d_model (false: Gemma 3)
};

}  // namespace tkv::model
