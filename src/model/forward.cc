// The decoder forward pass shared by every architecture; the ModelConfig flags
// (qkv_bias, qk_norm, post_norms, ffn_act, windows, rope bases) select the
// per-architecture differences. Activations are fp32 rows [n, dim].
#include <cmath>

#include "base/check.h"
#include "base/timer.h"
#include "model/model.h"

namespace tkv::model {
namespace {
void grow(std::vector<float>& v, size_t n) {
  if (v.size() < n) v.resize(n);
}
}  // namespace

void Model::layer_forward(int il, kv::KvCache& cache, int seq, int64_t pos0, int64_t n,
                          ThreadPool& pool) {
  const ModelConfig& c = cfg_;
  const LayerWeights& L = w_.layers[static_cast<size_t>(il)];
  const int64_t d = c.d_model, hd = c.head_dim;
  const int64_t q_dim = int64_t{c.n_heads} * hd, kv_dim = int64_t{c.n_kv_heads} * hd;
  float* x = x_.data();

  kernels::rms_norm(x, L.attn_norm.data(), h_.data(), n, d, c.rms_eps);
  {
    const kernels::WeightView w[3] = {L.wq, L.wk, L.wv};
    float* const y[3] = {q_.data(), k_.data(), v_.data()};
    kernels::matmul_cpu_multi(w, 3, h_.data(), y, n, pool);
  }
  if (c.qkv_bias) {
    kernels::add_bias(q_.data(), L.bq.data(), n, q_dim);
    kernels::add_bias(k_.data(), L.bk.data(), n, kv_dim);
    kernels::add_bias(v_.data(), L.bv.data(), n, kv_dim);
  }
  if (c.qk_norm) {
    kernels::rms_norm(q_.data(), L.q_norm.data(), q_.data(), n * c.n_heads, hd, c.rms_eps);
    kernels::rms_norm(k_.data(), L.k_norm.data(), k_.data(), n * c.n_kv_heads, hd, c.rms_eps);
  }
  const float base = c.layer_rope_base[static_cast<size_t>(il)];
  kernels::rope(q_.data(), pos_.data(), n, c.n_heads, hd, c.n_rot, base, c.rope_freq_scale,
                c.rope_mode);
  kernels::rope(k_.data(), pos_.data(), n, c.n_kv_heads, hd, c.n_rot, base, c.rope_freq_scale,
                c.rope_mode);
  // Same constant for every position, so attention is unchanged (model.h).
  if (key_centering_active()) kernels::add_bias(k_.data(), L.k_center.data(), n, kv_dim);

  cache.write(il, seq, pos0, n, k_.data(), v_.data());
  kernels::AttnArgs a;
  a.q = q_.data();
  a.out = attn_.data();
  a.n_q = n;
  a.n_heads = c.n_heads;
  a.q_pos0 = pos0;
  a.window = c.layer_window[static_cast<size_t>(il)];
  a.scale = c.attn_scale > 0 ? c.attn_scale : 1.0f / std::sqrt(static_cast<float>(hd));
  const double t0 = now_ms();
  cache.attend(il, seq, a, pool);
  attn_ms_ += now_ms() - t0;

  kernels::matmul_cpu(L.wo, attn_.data(), h_.data(), n, pool);
  if (c.post_norms)
    kernels::rms_norm(h_.data(), L.post_attn_norm.data(), h_.data(), n, d, c.rms_eps);
  kernels::add_inplace(x, h_.data(), n * d);

  kernels::rms_norm(x, L.ffn_norm.data(), h_.data(), n, d, c.rms_eps);
  {
    const kernels::WeightView w[2] = {L.w_gate, L.w_up};
    float* const y[2] = {ff_gate_.data(), ff_up_.data()};
    kernels::matmul_cpu_multi(w, 2, h_.data(), y, n, pool);
  }
  if (c.ffn_act == FfnAct::kSilu) {
    kernels::silu_mul(ff_gate_.data(), ff_up_.data(), n * c.d_ff);
  } else {
    kernels::gelu_tanh_mul(ff_gate_.data(), ff_up_.data(), n * c.d_ff);
  }
  kernels::matmul_cpu(L.w_down, ff_gate_.data(), h_.data(), n, pool);
  if (c.post_norms)
    kernels::rms_norm(h_.data(), L.post_ffn_norm.data(), h_.data(), n, d, c.rms_eps);
  kernels::add_inplace(x, h_.data(), n * d);
}

Status Model::forward(kv::KvCache& cache, int seq, const int32_t* tokens, int64_t n,
                      bool all_logits, float* logits, ThreadPool& pool) {
  const ModelConfig& c = cfg_;
  if (n <= 0) return invalid_argument("[model] forward needs at least one token");
  for (int64_t i = 0; i < n; ++i)
    if (tokens[i] < 0 || tokens[i] >= c.n_vocab)
      return invalid_argument("[model] token id {} out of range [0, {})", tokens[i], c.n_vocab);
  const int64_t pos0 = cache.seq_len(seq);
  TKV_RETURN_IF_ERROR(cache.reserve(seq, n));
  const size_t nn = static_cast<size_t>(n);
  const size_t q_dim = static_cast<size_t>(c.n_heads) * c.head_dim,
               kv_dim = static_cast<size_t>(c.n_kv_heads) * c.head_dim;
  grow(x_, nn * c.d_model);
  grow(h_, nn * std::max<size_t>(c.d_model, q_dim));
  grow(q_, nn * q_dim);
  grow(k_, nn * kv_dim);
  grow(v_, nn * kv_dim);
  grow(attn_, nn * q_dim);
  grow(ff_gate_, nn * c.d_ff);
  grow(ff_up_, nn * c.d_ff);
  pos_.resize(nn);
  for (size_t i = 0; i < nn; ++i) pos_[i] = static_cast<int32_t>(pos0 + static_cast<int64_t>(i));

  kernels::get_rows(w_.tok_embd, tokens, n, x_.data());
  if (c.embed_scale != 1.0f) kernels::scale_inplace(x_.data(), c.embed_scale, n * c.d_model);
  for (int il = 0; il < c.n_layers; ++il) layer_forward(il, cache, seq, pos0, n, pool);
  cache.commit(seq, n);

  const int64_t n_out = all_logits ? n : 1;
  const float* last = x_.data() + (n - n_out) * c.d_model;
  grow(tmp_, static_cast<size_t>(n_out) * c.d_model);
  kernels::rms_norm(last, w_.output_norm.data(), tmp_.data(), n_out, c.d_model, c.rms_eps);
  kernels::matmul_cpu(w_.output, tmp_.data(), logits, n_out, pool);
  if (c.final_logit_softcap > 0) {
    const float cap = c.final_logit_softcap;
    for (int64_t i = 0; i < n_out * c.n_vocab; ++i) logits[i] = cap * std::tanh(logits[i] / cap);
  }
  return Status();
}

}  // namespace tkv::model
