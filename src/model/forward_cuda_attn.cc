// CudaForward's attention: the step's tables (encode slots, page rows) and the kernels.
// One-token slices (decode) run the one-query decode kernel, each batch row its own
// "sequence"; longer slices (prefill chunks, verify chunks) run the prefill kernel,
// whose blocks share every K/V tile among 64 query rows (re-reading the whole prefix
// once per token, as the decode kernel did for prefill, made a 32k prompt quadratic
// in memory traffic). Formats the prefill kernel does not take keep the decode kernel
// per token.
#include <algorithm>

#include "device/cuda_check.h"
#include "kernels/attention_cuda/attention_cuda.h"
#include "kernels/attention_cuda/prefill_cuda.h"
#include "kernels/kvcodec/kvcodec_cuda.h"
#include "kernels/nn_cuda/nn_cuda.h"
#include "model/forward_cuda.h"
#include "model/forward_cuda_util.h"

namespace tkv::model {
namespace {
using cuda_fwd::ck;
using cuda_fwd::ensure;
using cuda_fwd::I;
Status upload(device::CudaBuffer& dst, const int32_t* src, size_t n, cudaStream_t s,
              const char* what) {
  TKV_RETURN_IF_ERROR(ensure(dst, std::max<size_t>(n, 1) * 4));
  return ck(cudaMemcpyAsync(dst.data(), src, n * 4, cudaMemcpyHostToDevice, s), what);
}
// An upper bound of a decode step's longest sequence that changes rarely: 256, or the
// length rounded up to a sixteenth of the power of two below it (at most 12.5 % over).
// A graph's launches depend on it (the split-KV plan, the block-table stride), so a
// sequence growing by one token reuses the captured graph.
int64_t graph_len_bucket(int64_t len) {
  if (len <= 256) return 256;
  int64_t g = 1;
  while (g * 16 < len) g *= 2;
  return (len + g - 1) / g * g;
}
}  // namespace

kernels::PagedKv CudaForward::paged(int il) const {
  const DevLayer& D = layers_[static_cast<size_t>(il)];
  kernels::PagedKv kv;
  kv.format = kv_format_;
  kv.k_data = static_cast<uint8_t*>(D.k_data.data());
  kv.v_data = static_cast<uint8_t*>(D.v_data.data());
  kv.k_scale = static_cast<uint16_t*>(D.k_scale.data());
  kv.k_zero = static_cast<uint16_t*>(D.k_zero.data());
  kv.v_scale = static_cast<uint16_t*>(D.v_scale.data());
  kv.page_indices = I(pages_);
  kv.seq_lens = I(seq_lens_);
  kv.page_stride = page_stride_;
  return kv;
}

// Per token: its slot (page * page_size + offset) for the encode. Decode rows: a
// block-table row (the slice's pages) and seq_len = position + 1; rows of prefill slices
// get seq_len 0 (the decode kernel writes zeros there, the prefill kernel after it the
// rows). Per prefill slice: (first row, tokens, seq_len) and a block-table row. A step of
// decode rows only runs as a graph, its max_seq_len and stride bucketed.
Status CudaForward::build_tables(const Batch& b, const Workspace& ws, const kv::KvCache& cache) {
  const int64_t n = b.n_tokens(), ps = kv_format_.page_size;
  int64_t stride = 1, n_pf = 0, n_dec = 0, len_max = 0;
  for (const BatchSlice& s : b.slices) {
    len_max = std::max(len_max, ws.pos[static_cast<size_t>(s.first)] + s.n);
    const bool pf = prefill_ok_ && s.n > 1;
    n_pf += pf;
    n_dec += pf ? 0 : s.n;
  }
  // Decode-only steps take the bucketed bound with graphs on or off, so both launch the
  // same kernels with the same arguments (the same bits; forward_cuda_test checks).
  const bool decode_only = n_pf == 0 && n <= kGraphMaxTokens;
  graph_step_ = graphs_on_ && decode_only;
  const int64_t len_bound = decode_only ? graph_len_bucket(len_max) : len_max;
  stride = std::max(stride, (len_bound + ps - 1) / ps);
  page_stride_ = static_cast<int>(stride);
  max_seq_len_ = max_q_len_ = n_decode_ = n_prefill_ = 0;
  // Decode rows' block table only when the step has decode rows (a 512-token chunk at 32k
  // context would otherwise clear and copy 4 MB of unused rows per step).
  host_tables_.assign(static_cast<size_t>(2 * n + (n_dec > 0 ? n * stride : 0)), 0);
  host_pf_.assign(static_cast<size_t>(3 * n_pf + n_pf * stride), 0);
  int32_t *slots = host_tables_.data(), *lens = slots + n, *pages = lens + n;
  int32_t *pf_first = host_pf_.data(), *pf_n = pf_first + n_pf, *pf_len = pf_n + n_pf,
          *pf_pages = pf_len + n_pf;
  for (const BatchSlice& s : b.slices) {
    const int64_t pos0 = ws.pos[static_cast<size_t>(s.first)];
    const kernels::KvView view = cache.view(0, s.seq, pos0 + s.n);
    if (view.n_segs != 1 || view.segs[0].pos0 != 0)
      return make_error(StatusCode::kInternal, "[cuda] sequence {} has {} KV segments", s.seq,
                        view.n_segs);
    const int32_t* ids = view.segs[0].page_ids;
    const int64_t n_pages = (pos0 + s.n + ps - 1) / ps;
    const bool prefill = prefill_ok_ && s.n > 1;
    for (int64_t j = 0; j < s.n; ++j) {
      const int64_t i = s.first + j, p = pos0 + j;
      slots[i] = static_cast<int32_t>(ids[p / ps] * ps + p % ps);
      if (prefill) continue;
      lens[i] = static_cast<int32_t>(p + 1);
      std::copy(ids, ids + n_pages, pages + i * stride);
      ++n_decode_;
    }
    if (prefill) {
      const int k = n_prefill_++;
      pf_first[k] = static_cast<int32_t>(s.first);
      pf_n[k] = static_cast<int32_t>(s.n);
      pf_len[k] = static_cast<int32_t>(pos0 + s.n);
      std::copy(ids, ids + n_pages, pf_pages + k * stride);
      max_q_len_ = std::max<int>(max_q_len_, static_cast<int>(s.n));
    }
  }
  if (n_decode_ > 0) max_seq_len_ = static_cast<int>(len_bound);
  const size_t nn = static_cast<size_t>(n);
  TKV_RETURN_IF_ERROR(upload(slots_, slots, nn, stream_, "[cuda] slots"));
  if (n_decode_ > 0) {
    TKV_RETURN_IF_ERROR(upload(seq_lens_, lens, nn, stream_, "[cuda] seq_lens"));
    TKV_RETURN_IF_ERROR(
        upload(pages_, pages, nn * static_cast<size_t>(stride), stream_, "[cuda] page table"));
  }
  if (n_prefill_ > 0)
    TKV_RETURN_IF_ERROR(
        upload(pf_tables_, host_pf_.data(), host_pf_.size(), stream_, "[cuda] prefill tables"));
  return Status();
}

kernels::DecodeCudaParams CudaForward::decode_params(int il, int64_t n) const {
  kernels::DecodeCudaParams p;
  p.kv = paged(il);
  p.n_seqs = static_cast<int>(n);
  p.n_heads = cfg_.n_heads;
  p.max_seq_len = max_seq_len_;
  p.softmax_scale = attn_scale_;
  // fp32 q and out (the general kernel): bf16 ones cost SmolLM2 a mean KL of 0.004-0.1
  p.q_f32 = static_cast<const float*>(q_.data());
  p.out_f32 = static_cast<float*>(attn_.data());
  p.sm_count = sm_count_;
  if (tc_attn_) {
    // The tensor-core kernel (head_dim 128: bf16 and turbo k8v3/k8v4/k4v3/k4v2) takes bf16 q
    // and out: q is already on the int8 grid for quantized keys, and out meets the int8
    // rounding of the next GEMV's input, so bf16 adds little (attention_cuda_test bounds it).
    kernels::DecodeCudaParams t = p;
    t.q_f32 = nullptr;
    t.out_f32 = nullptr;
    t.q = static_cast<const uint16_t*>(q_bf16_.data());
    t.out = static_cast<uint16_t*>(out_bf16_.data());
    if (kernels::decode_uses_tensor_cores(t)) return t;
  }
  return p;
}

Status CudaForward::attention(int il, int64_t n) {
  const ModelConfig& c = cfg_;
  float *q = static_cast<float*>(q_.data()), *out = static_cast<float*>(attn_.data());
  kernels::KvEncodeCudaParams ep;
  ep.cache = paged(il);
  ep.n_tokens = static_cast<int>(n);
  ep.k = static_cast<const float*>(k_.data());
  ep.v = static_cast<const float*>(v_.data());
  ep.slot_mapping = I(slots_);
  TKV_RETURN_IF_ERROR(kernels::kvcodec_encode_cuda(ep, stream_));
  // Quantized keys: the query on the int8 grid the CPU's fused attention scores with
  // (fused_int8_query_rows), so the two backends see the same query.
  if (!kv_format_.is_float())
    TKV_RETURN_IF_ERROR(ck(kernels::int8_grid_rows_cuda(q, n * c.n_heads, c.head_dim, stream_),
                           "[cuda] int8 query"));
  if (n_decode_ > 0) {
    kernels::DecodeCudaParams p = decode_params(il, n);
    const int64_t nq = n * c.n_heads * c.head_dim;
    if (p.q)
      TKV_RETURN_IF_ERROR(
          ck(kernels::f32_to_bf16_cuda(q, static_cast<uint16_t*>(q_bf16_.data()), nq, stream_),
             "[cuda] q to bf16"));
    const int64_t ws_bytes = kernels::decode_workspace_bytes(p);
    TKV_RETURN_IF_ERROR(ensure(attn_ws_, static_cast<size_t>(ws_bytes)));
    p.workspace = attn_ws_.data();
    p.workspace_bytes = static_cast<int64_t>(attn_ws_.bytes());
    TKV_RETURN_IF_ERROR(kernels::decode_attention_cuda(p, stream_));
    if (p.out)  // before the prefill kernel writes its rows of out
      TKV_RETURN_IF_ERROR(ck(kernels::bf16_to_f32_cuda(p.out, out, nq, stream_), "[cuda] out"));
  }
  if (n_prefill_ == 0) return Status();
  const int32_t* t = I(pf_tables_);
  kernels::PrefillCudaParams p;
  p.kv = paged(il);
  p.kv.page_indices = t + 3 * n_prefill_;
  p.kv.seq_lens = t + 2 * n_prefill_;
  p.n_seqs = n_prefill_;
  p.n_heads = c.n_heads;
  p.max_q_len = max_q_len_;
  p.softmax_scale = attn_scale_;
  p.q_offsets = t;
  p.q_lens = t + n_prefill_;
  p.q = q;
  p.out = out;
  return kernels::prefill_attention_cuda(p, stream_);
}

}  // namespace tkv::model
