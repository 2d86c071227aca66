// The decoder forward pass shared by every architecture; the ModelConfig flags
// (qkv_bias, qk_norm, post_norms, ffn_act, windows, rope bases) select the
// per-architecture differences. Activations are fp32 rows [n, dim] over every
// token of the batch; only attention (and the KV write before it) runs per slice.
#include <algorithm>
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

Status Model::layer_forward(int il, const Batch& b, Workspace& ws, kv::KvCache& cache,
                            ThreadPool& pool) const {
  const ModelConfig& c = cfg_;
  const LayerWeights& L = w_.layers[static_cast<size_t>(il)];
  const int64_t n = b.n_tokens(), d = c.d_model, hd = c.head_dim;
  const int64_t q_dim = int64_t{c.n_heads} * hd, kv_dim = int64_t{c.n_kv_heads} * hd;
  float* x = ws.x.data();

  kernels::rms_norm(x, L.attn_norm.data(), ws.h.data(), n, d, c.rms_eps);
  {
    const kernels::WeightView w[3] = {L.wq, L.wk, L.wv};
    float* const y[3] = {ws.q.data(), ws.k.data(), ws.v.data()};
    kernels::matmul_cpu_multi(w, 3, ws.h.data(), y, n, pool);
  }
  if (c.qkv_bias) {
    kernels::add_bias(ws.q.data(), L.bq.data(), n, q_dim);
    kernels::add_bias(ws.k.data(), L.bk.data(), n, kv_dim);
    kernels::add_bias(ws.v.data(), L.bv.data(), n, kv_dim);
  }
  if (c.qk_norm) {
    kernels::rms_norm(ws.q.data(), L.q_norm.data(), ws.q.data(), n * c.n_heads, hd, c.rms_eps);
    kernels::rms_norm(ws.k.data(), L.k_norm.data(), ws.k.data(), n * c.n_kv_heads, hd, c.rms_eps);
  }
  const float base = c.layer_rope_base[static_cast<size_t>(il)];
  kernels::rope(ws.q.data(), ws.pos.data(), n, c.n_heads, hd, c.n_rot, base, c.rope_freq_scale,
                c.rope_mode);
  kernels::rope(ws.k.data(), ws.pos.data(), n, c.n_kv_heads, hd, c.n_rot, base, c.rope_freq_scale,
                c.rope_mode);
  // Same constant for every position, so attention is unchanged (model.h).
  if (key_centering_active()) kernels::add_bias(ws.k.data(), L.k_center.data(), n, kv_dim);

  // Every slice's new K/V into its pages first, then one attention pass over all
  // slices (views taken after the writes, which may map pages).
  const double t0 = now_ms();
  const size_t ns = b.slices.size();
  ws.attn_args.resize(ns);
  ws.attn_views.resize(ns);
  for (size_t k = 0; k < ns; ++k) {
    const BatchSlice& s = b.slices[k];
    const int64_t pos0 = ws.pos[static_cast<size_t>(s.first)];
    cache.write(il, s.seq, pos0, s.n, ws.k.data() + s.first * kv_dim,
                ws.v.data() + s.first * kv_dim);
    kernels::AttnArgs& a = ws.attn_args[k];
    a.q = ws.q.data() + s.first * q_dim;
    a.out = ws.attn.data() + s.first * q_dim;
    a.n_q = s.n;
    a.n_heads = c.n_heads;
    a.q_pos0 = pos0;
    a.window = c.layer_window[static_cast<size_t>(il)];
    a.scale = c.attn_scale > 0 ? c.attn_scale : 1.0f / std::sqrt(static_cast<float>(hd));
  }
  for (size_t k = 0; k < ns; ++k) {
    const BatchSlice& s = b.slices[k];
    ws.attn_views[k] = cache.view(il, s.seq, ws.attn_args[k].q_pos0 + s.n);
  }
  TKV_RETURN_IF_ERROR(ops::attention_batch(ws.attn_args.data(), ws.attn_views.data(),
                                           static_cast<int>(ns), attn_mode_, &attn_check_, pool));
  ws.attention_ms += now_ms() - t0;

  kernels::matmul_cpu(L.wo, ws.attn.data(), ws.h.data(), n, pool);
  if (c.post_norms)
    kernels::rms_norm(ws.h.data(), L.post_attn_norm.data(), ws.h.data(), n, d, c.rms_eps);
  kernels::add_inplace(x, ws.h.data(), n * d);

  kernels::rms_norm(x, L.ffn_norm.data(), ws.h.data(), n, d, c.rms_eps);
  {
    const kernels::WeightView w[2] = {L.w_gate, L.w_up};
    float* const y[2] = {ws.ff_gate.data(), ws.ff_up.data()};
    kernels::matmul_cpu_multi(w, 2, ws.h.data(), y, n, pool);
  }
  if (c.ffn_act == FfnAct::kSilu) {
    kernels::silu_mul(ws.ff_gate.data(), ws.ff_up.data(), n * c.d_ff);
  } else {
    kernels::gelu_tanh_mul(ws.ff_gate.data(), ws.ff_up.data(), n * c.d_ff);
  }
  kernels::matmul_cpu(L.w_down, ws.ff_gate.data(), ws.h.data(), n, pool);
  if (c.post_norms)
    kernels::rms_norm(ws.h.data(), L.post_ffn_norm.data(), ws.h.data(), n, d, c.rms_eps);
  kernels::add_inplace(x, ws.h.data(), n * d);
  return Status();
}

// Final norm and the vocabulary projection over the wanted rows only: one
// matmul for every slice's last token (decode) or all its tokens (scoring).
void Model::output_logits(const Batch& b, Workspace& ws, ThreadPool& pool) const {
  const ModelConfig& c = cfg_;
  ws.logits_row.assign(b.slices.size(), -1);
  int64_t rows = 0;
  for (size_t i = 0; i < b.slices.size(); ++i) {
    const BatchSlice& s = b.slices[i];
    if (s.logits == LogitsWanted::kNone) continue;
    ws.logits_row[i] = rows;
    rows += s.logits == LogitsWanted::kAll ? s.n : 1;
  }
  if (rows == 0) return;
  grow(ws.tmp, static_cast<size_t>(rows * c.d_model));
  for (size_t i = 0; i < b.slices.size(); ++i) {
    const BatchSlice& s = b.slices[i];
    if (ws.logits_row[i] < 0) continue;
    const int64_t n_out = s.logits == LogitsWanted::kAll ? s.n : 1;
    const float* src = ws.x.data() + (s.first + s.n - n_out) * c.d_model;
    kernels::rms_norm(src, w_.output_norm.data(), ws.tmp.data() + ws.logits_row[i] * c.d_model,
                      n_out, c.d_model, c.rms_eps);
  }
  grow(ws.logits, static_cast<size_t>(rows * c.n_vocab));
  kernels::matmul_cpu(w_.output, ws.tmp.data(), ws.logits.data(), rows, pool);
  if (c.final_logit_softcap > 0) {
    const float cap = c.final_logit_softcap;
    for (int64_t i = 0; i < rows * c.n_vocab; ++i)
      ws.logits[static_cast<size_t>(i)] = cap * std::tanh(ws.logits[static_cast<size_t>(i)] / cap);
  }
}

Status Model::set_backend(ops::Backend b, kv::KvCache& cache) {
  dev_.reset();
  dev_cache_ = nullptr;
  cache.set_page_copy_hook(nullptr);
  if (b == ops::Backend::kCpu) return Status();
  if (attn_mode_ != ops::AttnMode::kFused)
    return invalid_argument(
        "[model] --device cuda runs the fused attention only (--kv-attn fused)");
  TKV_ASSIGN_OR_RETURN(dev_, make_cuda_forward(cfg_, w_, cache, key_centering_active()));
  dev_cache_ = &cache;
  cache.set_page_copy_hook(
      [dev = dev_](int, int32_t src, int32_t dst) { dev->copy_page(src, dst); });
  return Status();
}

Status Model::forward(const Batch& b, Workspace& ws, kv::KvCache& cache, ThreadPool& pool) const {
  const ModelConfig& c = cfg_;
  const int64_t n = b.n_tokens();
  if (b.slices.empty()) return invalid_argument("[model] forward needs at least one slice");
  std::vector<int> seqs;
  int64_t covered = 0;
  for (const BatchSlice& s : b.slices) {
    if (s.n <= 0 || s.first < 0 || s.first > n - s.n)
      return invalid_argument("[model] batch slice [{}, +{}) outside the batch's {} tokens",
                              s.first, s.n, n);
    seqs.push_back(s.seq);
    covered += s.n;
  }
  if (covered != n)
    return invalid_argument("[model] batch slices cover {} of its {} tokens", covered, n);
  std::sort(seqs.begin(), seqs.end());
  if (std::adjacent_find(seqs.begin(), seqs.end()) != seqs.end())
    return invalid_argument("[model] a batch names sequence {} twice",
                            *std::adjacent_find(seqs.begin(), seqs.end()));
  for (int64_t i = 0; i < n; ++i) {
    const int32_t t = b.tokens[static_cast<size_t>(i)];
    if (t < 0 || t >= c.n_vocab)
      return invalid_argument("[model] token id {} out of range [0, {})", t, c.n_vocab);
  }
  const size_t nn = static_cast<size_t>(n);
  ws.pos.resize(nn);
  for (const BatchSlice& s : b.slices) {
    const int64_t pos0 = cache.seq_len(s.seq);
    TKV_RETURN_IF_ERROR(cache.reserve(s.seq, s.n));
    for (int64_t i = 0; i < s.n; ++i)
      ws.pos[static_cast<size_t>(s.first + i)] = static_cast<int32_t>(pos0 + i);
  }
  if (dev_) {
    if (&cache != dev_cache_)
      return invalid_argument("[model] the CUDA forward runs over the cache it was set up with");
    TKV_RETURN_IF_ERROR(dev_->run(b, ws, cache));
    for (const BatchSlice& s : b.slices) cache.commit(s.seq, s.n);
    return Status();
  }
  const size_t q_dim = static_cast<size_t>(c.n_heads) * c.head_dim,
               kv_dim = static_cast<size_t>(c.n_kv_heads) * c.head_dim;
  grow(ws.x, nn * c.d_model);
  grow(ws.h, nn * std::max<size_t>(c.d_model, q_dim));
  grow(ws.q, nn * q_dim);
  grow(ws.k, nn * kv_dim);
  grow(ws.v, nn * kv_dim);
  grow(ws.attn, nn * q_dim);
  grow(ws.ff_gate, nn * c.d_ff);
  grow(ws.ff_up, nn * c.d_ff);

  kernels::get_rows(w_.tok_embd, b.tokens.data(), n, ws.x.data());
  if (c.embed_scale != 1.0f) kernels::scale_inplace(ws.x.data(), c.embed_scale, n * c.d_model);
  for (int il = 0; il < c.n_layers; ++il)
    TKV_RETURN_IF_ERROR(layer_forward(il, b, ws, cache, pool));
  for (const BatchSlice& s : b.slices) cache.commit(s.seq, s.n);
  output_logits(b, ws, pool);
  return Status();
}

}  // namespace tkv::model
