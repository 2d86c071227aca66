// Host side of the CUDA KV encode: validation ("[kvcodec_cuda] ...") and the
// device tables, then the launch in kvcodec_cuda.cu. Built only with TKV_CUDA.
#include <cstdint>
#include <string>

#include "base/status.h"
#include "device/cuda_check.h"
#include "kernels/kvcodec/kvcodec_cuda.h"
#include "kernels/kvcodec/turbo_tables_cuda.h"
#include "quant/kv_scheme.h"
#include "quant/turbo_tables.h"

namespace tkv::kernels {

Status kvcodec_encode_cuda(const KvEncodeCudaParams& p, cudaStream_t stream) {
  const KvPageFormat& f = p.cache.format;
  auto bad = [](const std::string& m) {
    return Status(StatusCode::kInvalidArgument, "[kvcodec_cuda] " + m);
  };
  // The CUDA kernels read bf16 or turbo pages (no f16 or affine kernels yet).
  if (f.scheme.kind != quant::KvKind::kBf16 && f.scheme.kind != quant::KvKind::kTurbo)
    return bad("scheme kind " + std::to_string((int)f.scheme.kind) + " is not bf16 or turbo");
  if (f.head_dim() != 64 && f.head_dim() != 128 && f.head_dim() != 256 && f.head_dim() != 512)
    return bad("head_dim " + std::to_string(f.head_dim()) + " not in {64,128,256,512}");
  const bool kb_ok = f.scheme.k_bits == 2 || f.scheme.k_bits == 3 || f.scheme.k_bits == 4 ||
                     f.scheme.k_bits == 5 || f.scheme.k_bits == 8;
  const bool vb_ok = f.scheme.v_bits == 1 || f.scheme.v_bits == 2 || f.scheme.v_bits == 3 ||
                     f.scheme.v_bits == 4 || f.scheme.v_bits == 5 || f.scheme.v_bits == 8;
  if (!f.is_float() && (!kb_ok || !vb_ok))
    return bad("turbo widths k" + std::to_string(f.scheme.k_bits) + "v" +
               std::to_string(f.scheme.v_bits) + " not in k{2,3,4,5,8} v{1,2,3,4,5,8}");
  if (p.n_tokens < 0 || p.cache.format.n_kv_heads <= 0 ||
      (int64_t)p.n_tokens * p.cache.format.n_kv_heads > INT32_MAX)
    return bad("n_tokens/n_kv_heads out of range");
  if (p.cache.format.page_size <= 0 ||
      (p.cache.format.page_size & (p.cache.format.page_size - 1)) != 0)
    return bad("page_size " + std::to_string(p.cache.format.page_size) + " is not a power of two");
  if (f.scheme.cpu_only())
    return bad("symmetric keys and the absmax value codebook (" + quant::kv_scheme_name(f.scheme) +
               ") are not on CUDA yet");
  if (p.n_tokens > 0 && !p.slot_mapping) return bad("null slot_mapping");
  if ((p.k && !p.cache.k_data) || (p.v && !p.cache.v_data) ||
      (!f.is_float() &&
       ((p.k && (!p.cache.k_scale || !p.cache.k_zero)) || (p.v && !p.cache.v_scale))))
    return bad("null cache plane");
  const float* signs = nullptr;
  const float* boundaries = nullptr;
  const float* centroids = nullptr;  // only for the fitted V scale
  if (!f.is_float()) {
    signs = turbo_signs_cuda(f.head_dim());
    boundaries = turbo_boundaries_cuda(f.scheme.v_bits);
    if (f.scheme.v_mse_scale) centroids = turbo_centroids_cuda(f.scheme.v_bits);
    if (!signs || !boundaries || (f.scheme.v_mse_scale && !centroids))
      return Status(StatusCode::kInternal, "[kvcodec_cuda] table upload failed");
  }
  return device::cuda_status(
      cuda_detail::launch_kv_encode(p, signs, quant::turbo_inv_sqrt(f.head_dim()), boundaries,
                                    centroids, stream),
      "[kvcodec_cuda] encode launch");
}

}  // namespace tkv::kernels
