// CudaForward::run: one ragged batch on the GPU, op for op as forward.cc (attention and
// the step's tables: forward_cuda_attn.cc). Logits come back to the host only for the
// rows the batch wants.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "device/cuda_check.h"
#include "kernels/matmul/matmul.h"
#include "kernels/matmul_cuda/gemm_cuda.h"
#include "kernels/nn_cuda/nn_cuda.h"
#include "model/forward_cuda.h"
#include "model/forward_cuda_util.h"
#include "quant/turbo_tables.h"

namespace tkv::model {
namespace {
using cuda_fwd::ck;
using cuda_fwd::ensure;
using cuda_fwd::F;
using cuda_fwd::I;
}  // namespace

Status CudaForward::ensure_workspace(int64_t n) {
  if (n <= cap_) return Status();
  const ModelConfig& c = cfg_;
  const size_t t = static_cast<size_t>(std::max<int64_t>(n, kernels::kGemvMaxTokens));
  const size_t d = static_cast<size_t>(c.d_model), q_dim = size_t{1} * c.n_heads * c.head_dim,
               kv_dim = size_t{1} * c.n_kv_heads * c.head_dim, f = sizeof(float);
  TKV_RETURN_IF_ERROR(ensure(x_, t * d * f));
  TKV_RETURN_IF_ERROR(ensure(h_, t * std::max(d, q_dim) * f));
  TKV_RETURN_IF_ERROR(ensure(q_, t * q_dim * f));
  TKV_RETURN_IF_ERROR(ensure(k_, t * kv_dim * f));
  TKV_RETURN_IF_ERROR(ensure(v_, t * kv_dim * f));
  TKV_RETURN_IF_ERROR(ensure(attn_, t * q_dim * f));
  TKV_RETURN_IF_ERROR(ensure(ff_gate_, t * static_cast<size_t>(c.d_ff) * f));
  TKV_RETURN_IF_ERROR(ensure(ff_up_, t * static_cast<size_t>(c.d_ff) * f));
  TKV_RETURN_IF_ERROR(ensure(pos_, t * 4));
  TKV_RETURN_IF_ERROR(ensure(slots_, t * 4));
  TKV_RETURN_IF_ERROR(ensure(seq_lens_, t * 4));
  TKV_RETURN_IF_ERROR(ensure(rows_, t * 4));
  TKV_RETURN_IF_ERROR(ensure(logits_in_, t * d * f));
  TKV_RETURN_IF_ERROR(ensure(logits_, t * static_cast<size_t>(c.n_vocab) * f));
  TKV_RETURN_IF_ERROR(ensure(q_bf16_, t * q_dim * 2));
  TKV_RETURN_IF_ERROR(ensure(out_bf16_, t * q_dim * 2));
  cap_ = static_cast<int64_t>(t);
  return Status();
}

Status CudaForward::gemv(const DevMatrix& m, const float* x, float* y, int64_t n) {
  if (n >= kGemmMinTokens) {
    if (!cublas_) TKV_RETURN_IF_ERROR(kernels::gemm_cuda_create(&cublas_));
    const int64_t bytes = kernels::gemm_cuda_scratch_bytes(m.n_in, m.n_out, n);
    TKV_RETURN_IF_ERROR(ensure(gemm_scratch_, static_cast<size_t>(bytes)));
    kernels::GemmCudaParams p;
    p.w = m.data();
    p.type = m.type;
    p.n_in = m.n_in;
    p.n_out = m.n_out;
    p.n_tokens = n;
    p.x = x;
    p.y = y;
    p.scratch = gemm_scratch_.data();
    p.scratch_bytes = static_cast<int64_t>(gemm_scratch_.bytes());
    p.cublas = cublas_;
    return kernels::gemm_cuda(p, stream_);
  }
  return gemv_split(m, x, n, y, m.n_out, nullptr, 0, nullptr);
}

Status CudaForward::gemv_split(const DevMatrix& m, const float* x, int64_t n, float* y0, int64_t n0,
                               float* y1, int64_t n1, float* y2) {
  const int64_t n2 = m.n_out - n0 - n1;
  for (int64_t t0 = 0; t0 < n; t0 += kernels::kGemvMaxTokens) {
    kernels::GemvCudaParams p;
    p.w = m.data();
    p.type = m.type;
    p.n_in = m.n_in;
    p.n_out = m.n_out;
    p.n_tokens = static_cast<int>(std::min<int64_t>(kernels::kGemvMaxTokens, n - t0));
    p.x = x + t0 * m.n_in;
    p.y = y0 + t0 * n0;
    p.y1 = n1 > 0 ? y1 + t0 * n1 : nullptr;
    p.y2 = n2 > 0 ? y2 + t0 * n2 : nullptr;
    p.split1 = n0;
    p.split2 = n0 + n1;
    p.sm_count = sm_count_;
    p.variant = gemv_variant_;
    p.pdl = pdl_on_;
    TKV_RETURN_IF_ERROR(kernels::gemv_cuda(p, stream_));
  }
  return Status();
}

Status CudaForward::layer_forward(int il, int64_t n) {
  const ModelConfig& c = cfg_;
  const DevLayer& D = layers_[static_cast<size_t>(il)];
  const int64_t d = c.d_model, hd = c.head_dim;
  const int64_t q_dim = int64_t{c.n_heads} * hd, kv_dim = int64_t{c.n_kv_heads} * hd;
  float *x = F(x_), *h = F(h_), *q = F(q_), *k = F(k_), *v = F(v_);
  cudaStream_t s = stream_;
  if (il == 0)  // later layers: the previous layer's residual add did this norm
    TKV_RETURN_IF_ERROR(
        ck(kernels::rms_norm_cuda(x, D.attn_norm, h, n, d, c.rms_eps, s), "[cuda] norm"));
  if (D.wqkv.n_out > 0 && n < kGemmMinTokens) {
    TKV_RETURN_IF_ERROR(gemv_split(D.wqkv, h, n, q, q_dim, k, kv_dim, v));
  } else {
    TKV_RETURN_IF_ERROR(gemv(D.wq, h, q, n));
    TKV_RETURN_IF_ERROR(gemv(D.wk, h, k, n));
    TKV_RETURN_IF_ERROR(gemv(D.wv, h, v, n));
  }
  if (D.bq) {
    TKV_RETURN_IF_ERROR(ck(kernels::add_bias_cuda(q, D.bq, n, q_dim, s), "[cuda] bias"));
    TKV_RETURN_IF_ERROR(ck(kernels::add_bias_cuda(k, D.bk, n, kv_dim, s), "[cuda] bias"));
    TKV_RETURN_IF_ERROR(ck(kernels::add_bias_cuda(v, D.bv, n, kv_dim, s), "[cuda] bias"));
  }
  if (c.qk_norm) {
    TKV_RETURN_IF_ERROR(ck(kernels::rms_norm_cuda(q, D.q_norm, q, n * c.n_heads, hd, c.rms_eps, s),
                           "[cuda] q norm"));
    TKV_RETURN_IF_ERROR(
        ck(kernels::rms_norm_cuda(k, D.k_norm, k, n * c.n_kv_heads, hd, c.rms_eps, s),
           "[cuda] k norm"));
  }
  const float base = c.layer_rope_base[static_cast<size_t>(il)];
  TKV_RETURN_IF_ERROR(ck(kernels::rope_cuda(q, I(pos_), n, c.n_heads, hd, c.n_rot, base,
                                            c.rope_freq_scale, c.rope_mode, s),
                         "[cuda] rope"));
  TKV_RETURN_IF_ERROR(ck(kernels::rope_cuda(k, I(pos_), n, c.n_kv_heads, hd, c.n_rot, base,
                                            c.rope_freq_scale, c.rope_mode, s),
                         "[cuda] rope"));
  if (D.k_center)  // key centering (model.h): the same constant for every position
    TKV_RETURN_IF_ERROR(ck(kernels::add_bias_cuda(k, D.k_center, n, kv_dim, s), "[cuda] center"));
  if (k_signs_) {  // rotated keys (quant/kv_rotation.h): keys and queries through the same FWHT
    const float inv = quant::turbo_inv_sqrt(c.head_dim);
    const int hd_i = static_cast<int>(hd);
    TKV_RETURN_IF_ERROR(ck(kernels::fwht_rows_cuda(k, n * c.n_kv_heads, hd_i, k_signs_, inv, s),
                           "[cuda] rotate keys"));
    TKV_RETURN_IF_ERROR(ck(kernels::fwht_rows_cuda(q, n * c.n_heads, hd_i, k_signs_, inv, s),
                           "[cuda] rotate queries"));
  }
  TKV_RETURN_IF_ERROR(attention(il, n));

  TKV_RETURN_IF_ERROR(gemv(D.wo, F(attn_), h, n));
  if (c.post_norms)
    TKV_RETURN_IF_ERROR(
        ck(kernels::rms_norm_cuda(h, D.post_attn_norm, h, n, d, c.rms_eps, s), "[cuda] norm"));
  TKV_RETURN_IF_ERROR(ck(kernels::add_rms_norm_cuda(x, h, D.ffn_norm, h, n, d, c.rms_eps, s),
                         "[cuda] residual + norm"));
  if (D.w_gu.n_out > 0 && n < kGemmMinTokens) {
    TKV_RETURN_IF_ERROR(gemv_split(D.w_gu, h, n, F(ff_gate_), c.d_ff, F(ff_up_), c.d_ff, nullptr));
  } else {
    TKV_RETURN_IF_ERROR(gemv(D.w_gate, h, F(ff_gate_), n));
    TKV_RETURN_IF_ERROR(gemv(D.w_up, h, F(ff_up_), n));
  }
  const int64_t nf = n * c.d_ff;
  TKV_RETURN_IF_ERROR(ck(c.ffn_act == FfnAct::kSilu
                             ? kernels::silu_mul_cuda(F(ff_gate_), F(ff_up_), nf, s)
                             : kernels::gelu_tanh_mul_cuda(F(ff_gate_), F(ff_up_), nf, s),
                         "[cuda] ffn act"));
  TKV_RETURN_IF_ERROR(gemv(D.w_down, F(ff_gate_), h, n));
  if (c.post_norms)
    TKV_RETURN_IF_ERROR(
        ck(kernels::rms_norm_cuda(h, D.post_ffn_norm, h, n, d, c.rms_eps, s), "[cuda] norm"));
  if (il + 1 < c.n_layers)  // the residual add and the next layer's input norm, fused
    return ck(kernels::add_rms_norm_cuda(x, h, layers_[static_cast<size_t>(il) + 1].attn_norm, h, n,
                                         d, c.rms_eps, s),
              "[cuda] residual + norm");
  return ck(kernels::add_inplace_cuda(x, h, n * d, s), "[cuda] residual");
}

// The wanted logits rows (the last token of a slice, or all of them), on the device.
Status CudaForward::logits_rows(const Batch& b, Workspace& ws) {
  ws.logits_row.assign(b.slices.size(), -1);
  std::vector<int32_t> rows;
  for (size_t i = 0; i < b.slices.size(); ++i) {
    const BatchSlice& s = b.slices[i];
    if (s.logits == LogitsWanted::kNone) continue;
    ws.logits_row[i] = static_cast<int64_t>(rows.size());
    const int64_t n_out = s.logits == LogitsWanted::kAll ? s.n : 1;
    for (int64_t r = s.first + s.n - n_out; r < s.first + s.n; ++r)
      rows.push_back(static_cast<int32_t>(r));
  }
  n_rows_ = static_cast<int64_t>(rows.size());
  if (n_rows_ == 0) return Status();
  return ck(
      cudaMemcpyAsync(I(rows_), rows.data(), rows.size() * 4, cudaMemcpyHostToDevice, stream_),
      "[cuda] rows");
}

// Final norm and the vocabulary projection over the wanted rows only.
Status CudaForward::logits_kernels() {
  const ModelConfig& c = cfg_;
  const int64_t nr = n_rows_;
  if (nr == 0) return Status();
  TKV_RETURN_IF_ERROR(
      ck(kernels::gather_rows_cuda(F(x_), I(rows_), F(logits_in_), nr, c.d_model, stream_),
         "[cuda] gather"));
  TKV_RETURN_IF_ERROR(ck(kernels::rms_norm_cuda(F(logits_in_), output_norm_, F(logits_in_), nr,
                                                c.d_model, c.rms_eps, stream_),
                         "[cuda] output norm"));
  return gemv(output_, F(logits_in_), F(logits_), nr);
}

// Those rows alone come back to the host; the step ends here (one host sync).
Status CudaForward::fetch_logits(Workspace& ws) {
  const ModelConfig& c = cfg_;
  const size_t n_logits = static_cast<size_t>(n_rows_) * static_cast<size_t>(c.n_vocab);
  if (ws.logits.size() < n_logits) ws.logits.resize(n_logits);
  if (n_logits > 0)
    TKV_RETURN_IF_ERROR(ck(cudaMemcpyAsync(ws.logits.data(), F(logits_), n_logits * sizeof(float),
                                           cudaMemcpyDeviceToHost, stream_),
                           "[cuda] logits"));
  TKV_RETURN_IF_ERROR(ck(cudaStreamSynchronize(stream_), "[cuda] step"));
  if (c.final_logit_softcap > 0) {
    const float cap = c.final_logit_softcap;
    for (size_t i = 0; i < n_logits; ++i) ws.logits[i] = cap * std::tanh(ws.logits[i] / cap);
  }
  return Status();
}

Status CudaForward::step_kernels(int64_t n) {
  const ModelConfig& c = cfg_;
  if (c.embed_scale != 1.0f)
    TKV_RETURN_IF_ERROR(
        ck(kernels::scale_inplace_cuda(F(x_), c.embed_scale, n * c.d_model, stream_),
           "[cuda] embed scale"));
  for (int il = 0; il < c.n_layers; ++il) TKV_RETURN_IF_ERROR(layer_forward(il, n));
  return logits_kernels();
}

Status CudaForward::run(const Batch& b, Workspace& ws, const kv::KvCache& cache) {
  const ModelConfig& c = cfg_;
  const int64_t n = b.n_tokens();
  TKV_RETURN_IF_ERROR(copy_error_);
  if (n > 65535)  // the decode kernel's grid holds at most 65535 "sequences"
    return invalid_argument("[cuda] a step of {} tokens (at most 65535)", n);
  TKV_RETURN_IF_ERROR(ensure_workspace(n));
  // Embedding rows are dequantized on the host and copied (a device gather is next).
  host_x_.resize(static_cast<size_t>(n * c.d_model));
  kernels::get_rows(w_.tok_embd, b.tokens.data(), n, host_x_.data());
  TKV_RETURN_IF_ERROR(ck(cudaMemcpyAsync(F(x_), host_x_.data(), host_x_.size() * sizeof(float),
                                         cudaMemcpyHostToDevice, stream_),
                         "[cuda] embeddings"));
  TKV_RETURN_IF_ERROR(ck(cudaMemcpyAsync(I(pos_), ws.pos.data(), static_cast<size_t>(n) * 4,
                                         cudaMemcpyHostToDevice, stream_),
                         "[cuda] positions"));
  TKV_RETURN_IF_ERROR(build_tables(b, ws, cache));
  TKV_RETURN_IF_ERROR(logits_rows(b, ws));
  if (graph_step_)
    TKV_RETURN_IF_ERROR(run_graph(n));
  else
    TKV_RETURN_IF_ERROR(step_kernels(n));
  return fetch_logits(ws);
}

}  // namespace tkv::model
