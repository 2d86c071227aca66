// Gemma 3 decoder: embeddings × sqrt(d_model), RMSNorm on each Q/K head before
// rope, four norms per layer (pre/post attention, pre/post FFN), GeGLU (tanh
// GELU), NEOX rope with θ 1e4 on local layers and freq_base on global ones,
// sliding window on 5 of every 6 layers. The GGUF norms already include +1.
// Reference: llama.cpp llm_build_gemma3 (n_swa_pattern 6).
#include <cmath>

#include "io/gguf.h"
#include "model/registry.h"

namespace tkv::model {
namespace {
constexpr int kSwaPattern = 6;  // every 6th layer is global
constexpr float kLocalRopeBase = 10000.0f;

Status configure_gemma3(const io::GgufFile& g, ModelConfig& cfg) {
  TKV_RETURN_IF_ERROR(read_common_hparams(g, "gemma3", cfg));
  cfg.rope_mode = kernels::RopeMode::kNeox;
  cfg.qk_norm = true;
  cfg.post_norms = true;
  cfg.ffn_act = FfnAct::kGeluTanh;
  cfg.embed_scale = std::sqrt(static_cast<float>(cfg.d_model));
  cfg.q_dim_is_d_model = false;  // Gemma 3 270M: 4 heads x 256 = 1024 != 640
  int64_t window = 0;
  TKV_RETURN_IF_ERROR(
      read_int_key(g, "gemma3.attention.sliding_window", 0, kMaxContext, 512, &window));
  // rope scaling (linear) applies to the global layers of the larger Gemma 3 models.
  const std::string scaling = g.get_string_or("gemma3.rope.scaling.type", "none");
  float factor = 1.0f;
  TKV_RETURN_IF_ERROR(read_float_key(g, "gemma3.rope.scaling.factor", 1.0, &factor));
  const float global_scale = scaling == "linear" && factor > 0 ? 1.0f / factor : 1.0f;
  if (global_scale != 1.0f)
    return invalid_argument("[model] gemma3: linear rope scaling (factor {}) is not supported yet",
                            factor);
  for (int il = 0; il < cfg.n_layers; ++il) {
    const bool is_local = (il + 1) % kSwaPattern != 0;
    cfg.layer_window[static_cast<size_t>(il)] = is_local ? window : 0;
    if (is_local) cfg.layer_rope_base[static_cast<size_t>(il)] = kLocalRopeBase;
  }
  int64_t pre_attn = 0;
  TKV_RETURN_IF_ERROR(read_int_key(g, "gemma3.attention.query_pre_attn_scalar", 1, kMaxDim,
                                   cfg.head_dim, &pre_attn));
  cfg.attn_scale = 1.0f / std::sqrt(static_cast<float>(pre_attn));
  TKV_RETURN_IF_ERROR(
      read_float_key(g, "gemma3.final_logit_softcapping", 0.0, &cfg.final_logit_softcap));
  return Status();
}
const ArchRegistrar kReg({"gemma3", &configure_gemma3});
}  // namespace
}  // namespace tkv::model
