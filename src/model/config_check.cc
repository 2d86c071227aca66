// validate_config (see config_check.h). Every bound here guards a crash seen
// with a hostile file: rope dims past head_dim overflowed kernels::rope, a huge
// block_count walked millions of layers, huge windows overflowed cache sizing.
#include "model/config_check.h"

#include <cmath>

#include "io/gguf.h"

namespace tkv::model {
namespace {
// Tensors every layer binds at least: q, k, v, output, gate, up, down and two norms.
constexpr int64_t kMinTensorsPerLayer = 9;

bool positive_finite(float v) {
  return std::isfinite(v) && v > 0;
}
}  // namespace

Status validate_config(const ModelConfig& c, const io::GgufFile& g) {
  const std::string& path = g.path();
  const auto in = [](int64_t v, int64_t lo, int64_t hi) { return v >= lo && v <= hi; };
  if (!in(c.n_layers, 1, kMaxLayers) || !in(c.d_model, 1, kMaxDim) || !in(c.d_ff, 1, kMaxDim) ||
      !in(c.n_heads, 1, kMaxHeads) || !in(c.n_kv_heads, 1, kMaxHeads) ||
      !in(c.head_dim, 1, kMaxHeadDim) || !in(c.n_vocab, 1, kMaxVocab))
    return invalid_argument(
        "[model] {}: hyper-parameters out of range: {} layers (1..{}), d_model {} and d_ff {} "
        "(1..{}), {} heads and {} kv heads (1..{}), head_dim {} (1..{}), vocab {} (1..{})",
        path, c.n_layers, kMaxLayers, c.d_model, c.d_ff, kMaxDim, c.n_heads, c.n_kv_heads,
        kMaxHeads, c.head_dim, kMaxHeadDim, c.n_vocab, kMaxVocab);
  const int64_t n_tensors = static_cast<int64_t>(g.tensors().size());
  if (c.n_layers * kMinTensorsPerLayer > n_tensors)
    return invalid_argument(
        "[model] {}: block_count {} needs at least {} tensors ({} per layer); the file has {}",
        path, c.n_layers, c.n_layers * kMinTensorsPerLayer, kMinTensorsPerLayer, n_tensors);
  if (c.n_heads % c.n_kv_heads != 0)
    return invalid_argument("[model] {}: head_count {} is not a multiple of head_count_kv {}", path,
                            c.n_heads, c.n_kv_heads);
  if (c.q_dim_is_d_model && int64_t{c.n_heads} * c.head_dim != c.d_model)
    return invalid_argument(
        "[model] {}: head_count {} x head_dim {} = {} must equal embedding_length {} for '{}'",
        path, c.n_heads, c.head_dim, int64_t{c.n_heads} * c.head_dim, c.d_model, c.arch);
  if (c.n_rot <= 0 || c.n_rot > c.head_dim || c.n_rot % 2 != 0)
    return invalid_argument(
        "[model] {}: rope.dimension_count {} must be even and in [2, head_dim = {}]", path, c.n_rot,
        c.head_dim);
  if (!in(c.n_ctx_train, 1, kMaxContext))
    return invalid_argument("[model] {}: context_length {} out of range [1, {}]", path,
                            c.n_ctx_train, kMaxContext);
  if (!positive_finite(c.rms_eps) || c.rms_eps >= 1.0f)
    return invalid_argument("[model] {}: layer_norm_rms_epsilon {} must be finite, in (0, 1)", path,
                            c.rms_eps);
  if (!positive_finite(c.rope_freq_scale))
    return invalid_argument("[model] {}: rope frequency scale {} must be finite and > 0", path,
                            c.rope_freq_scale);
  if (c.layer_rope_base.size() != static_cast<size_t>(c.n_layers) ||
      c.layer_window.size() != static_cast<size_t>(c.n_layers))
    return invalid_argument("[model] {}: per-layer rope bases / windows do not cover {} layers",
                            path, c.n_layers);
  for (int il = 0; il < c.n_layers; ++il) {
    const float base = c.layer_rope_base[static_cast<size_t>(il)];
    if (!positive_finite(base))
      return invalid_argument("[model] {}: layer {} rope freq_base {} must be finite and > 0", path,
                              il, base);
    const int64_t w = c.layer_window[static_cast<size_t>(il)];
    if (!in(w, 0, kMaxContext))
      return invalid_argument("[model] {}: layer {} sliding window {} out of range [0, {}]", path,
                              il, w, kMaxContext);
  }
  if (!std::isfinite(c.embed_scale) || !(c.attn_scale >= 0) || !std::isfinite(c.attn_scale) ||
      !(c.final_logit_softcap >= 0) || !std::isfinite(c.final_logit_softcap))
    return invalid_argument(
        "[model] {}: embed scale {}, attention scale {} and logit softcap {} must be finite "
        "(scales >= 0)",
        path, c.embed_scale, c.attn_scale, c.final_logit_softcap);
  return Status();
}

}  // namespace tkv::model
