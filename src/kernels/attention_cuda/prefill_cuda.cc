// Host side of the CUDA prefill attention: validation ("[attention_cuda] prefill: ..."),
// the query tile (as many tokens as fill 64 rows with the kv head's GQA heads), the
// turbo tables, and the launch. Built only with TKV_CUDA.
#include "kernels/attention_cuda/prefill_cuda.h"

#include <algorithm>
#include <string>

#include "base/status.h"
#include "device/cuda_check.h"
#include "kernels/kvcodec/turbo_tables_cuda.h"
#include "quant/kv_scheme.h"
#include "quant/turbo_tables.h"

namespace tkv::kernels {
namespace {

bool valid_bits(int b, bool v) {
  return b == 2 || b == 3 || b == 4 || b == 5 || b == 8 || (v && b == 1);
}

Status validate(const PrefillCudaParams& p) {
  const KvPageFormat& f = p.kv.format;
  auto bad = [](const std::string& m) {
    return Status(StatusCode::kInvalidArgument, "[attention_cuda] prefill: " + m);
  };
  if (!prefill_cuda_supports(f, p.n_heads))
    return bad("format (scheme kind " + std::to_string((int)f.scheme.kind) + ", head_dim " +
               std::to_string(f.head_dim()) + ", " + std::to_string(p.n_heads) + " heads over " +
               std::to_string(f.n_kv_heads) + " kv heads) not taken");
  if (f.page_size <= 0 || (f.page_size & (f.page_size - 1)) != 0)
    return bad("page_size " + std::to_string(f.page_size) + " is not a power of two");
  if (p.n_seqs <= 0 || p.n_seqs > 65535)
    return bad("n_seqs " + std::to_string(p.n_seqs) + " not in [1, 65535]");
  if (p.max_q_len <= 0) return bad("max_q_len " + std::to_string(p.max_q_len) + " <= 0");
  if (p.kv.page_stride < 0) return bad("page_stride < 0");
  if (f.scheme.cpu_only())
    return bad("symmetric keys and the absmax value codebook (" + quant::kv_scheme_name(f.scheme) +
               ") are not on CUDA yet");
  if (!p.q || !p.out || !p.q_offsets || !p.q_lens || !p.kv.k_data || !p.kv.v_data ||
      (p.kv.page_stride == 0 && !p.kv.page_indptr) || !p.kv.page_indices || !p.kv.seq_lens ||
      (!f.is_float() && (!p.kv.k_scale || !p.kv.k_zero || !p.kv.v_scale)))
    return bad("null device pointer");
  return Status();
}

}  // namespace

bool prefill_cuda_supports(const KvPageFormat& f, int n_heads) {
  const int d = f.head_dim();
  const bool kind = f.scheme.kind == quant::KvKind::kBf16 ||
                    (f.scheme.kind == quant::KvKind::kTurbo && valid_bits(f.scheme.k_bits, false) &&
                     valid_bits(f.scheme.v_bits, true));
  return kind && (d == 64 || d == 128 || d == 256) && f.n_kv_heads > 0 && n_heads > 0 &&
         n_heads % f.n_kv_heads == 0 && n_heads / f.n_kv_heads <= cuda_detail::kPrefillRows;
}

Status prefill_attention_cuda(const PrefillCudaParams& p, cudaStream_t stream) {
  TKV_RETURN_IF_ERROR(validate(p));
  cuda_detail::PrefillLaunch l;
  l.p = p;
  l.q_scale = p.softmax_scale * 1.4426950408889634f;
  l.gqa = p.n_heads / p.kv.format.n_kv_heads;
  l.q_tile = cuda_detail::kPrefillRows / l.gqa;
  if (!p.kv.format.is_float()) {
    l.centroids = turbo_centroids_cuda(p.kv.format.scheme.v_bits);
    l.signs = turbo_signs_cuda(p.kv.format.head_dim());
    l.inv_sqrt = quant::turbo_inv_sqrt(p.kv.format.head_dim());
    if (!l.centroids || !l.signs)
      return Status(StatusCode::kInternal, "[attention_cuda] prefill: table upload failed");
  }
  return device::cuda_status(cuda_detail::launch_prefill(l, stream),
                             "[attention_cuda] prefill launch");
}

}  // namespace tkv::kernels
