// CUDA encode kernel of the KV codec: thread e of a (token, kv head) block owns
// element e; warp g is 32-group g. K: warp min/max, then quant::turbo_k_group_params
// and turbo_k_quantize per element; V: random-sign FWHT (butterflies of
// quant::fwht_stages, shuffles then shared memory), RMS over the group summed in
// index order as quant::turbo_v_encode_group, turbo_v_bucket. Packing is
// quant::bitpack_pack (into shared memory, then one byte per lane). No fast-math
// anywhere: the bits equal kvcodec_encode_ref's.
#include "kernels/kvcodec/kvcodec_cuda.h"
#include "quant/turbo_v.h"

namespace tkv::kernels::cuda_detail {
namespace {

constexpr unsigned kFull = 0xffffffffu;

// Packs the warp's 32 indices (idx: the group's s_idx) into out[0, 32 * bits / 8) by
// quant::bitpack_pack: lane 0 packs into the warp's shared buffer, then one lane per byte
// stores it (packing in place did byte read-modify-writes of global memory: 3.9-4.4x
// slower, docs/bench/cuda.md run 13). Called by the whole warp.
__device__ __forceinline__ void store_group(const uint8_t* idx, int bits, uint8_t* s_pack, uint8_t* out, int lane) {
  const int gb = quant::bitpack_bytes(quant::kTurboGroup, bits);
  if (lane == 0) quant::bitpack_pack(idx, 32, bits, s_pack);
  __syncwarp();
  if (lane < gb) out[lane] = s_pack[lane];
}

__device__ void encode_k(const KvEncodeCudaParams& p, float x, int64_t row, uint8_t* s_idx, uint8_t* s_pack) {
  const PagedKvFormat& f = p.cache.format;
  const int e = threadIdx.x, lane = e % 32, g = e / 32;
  const bool sgn = f.k_bits == 8 && f.k_signed;
  float mn = x, mx = x;
  for (int off = 16; off > 0; off >>= 1) {
    mn = fminf(mn, __shfl_xor_sync(kFull, mn, off));
    mx = fmaxf(mx, __shfl_xor_sync(kFull, mx, off));
  }
  float s, zp;
  const bool regular = quant::turbo_k_group_params(mn, mx, f.k_bits, sgn, &s, &zp);
  s_idx[e] = regular ? quant::turbo_k_quantize(x, s, zp, f.k_bits, sgn) : 0;
  __syncwarp();
  const int gb = quant::bitpack_bytes(quant::kTurboGroup, f.k_bits);
  store_group(s_idx + g * 32, f.k_bits, s_pack + g * 32, p.cache.k_data + row * f.k_row_bytes() + g * gb, lane);
  if (lane == 0) {
    p.cache.k_scale[row * f.n_groups() + g] = f32_to_f16(s);
    p.cache.k_zero[row * f.n_groups() + g] = f32_to_f16(zp);
  }
}

__device__ void encode_v(const KvEncodeCudaParams& p, float x, int64_t row, const float* signs, float inv_sqrt,
                         const float* boundaries, uint8_t* s_idx, float* s_x, uint8_t* s_pack) {
  const PagedKvFormat& f = p.cache.format;
  const int e = threadIdx.x, lane = e % 32, g = e / 32, d = f.head_dim;
  x = quant::mul_rn(x, signs[e]);
  for (int h = 1; h < d; h <<= 1) {  // quant::fwht_stages: lower a+b, upper a-b, stage by stage
    float other;
    if (h < 32) {
      other = __shfl_xor_sync(kFull, x, h);
    } else {
      s_x[e] = x;
      __syncthreads();
      other = s_x[e ^ h];
      __syncthreads();
    }
    x = (e & h) ? quant::add_rn(other, -x) : quant::add_rn(x, other);
  }
  x = quant::mul_rn(x, inv_sqrt);
  // quant::turbo_v_encode_group, one element per lane: the sum of squares runs in
  // index order (every lane the same sequence), so s matches the scalar codec.
  const float rh = round_f16(fminf(fmaxf(x, -quant::kF16Max), quant::kF16Max));
  float ss = 0.0f;
  for (int i = 0; i < 32; ++i) {
    const float r = __shfl_sync(kFull, rh, i);
    ss = quant::add_rn(ss, quant::mul_rn(r, r));
  }
  const float s = round_f16(sqrtf(quant::mul_rn(ss, 1.0f / 32.0f)));
  s_idx[e] = (uint8_t)quant::turbo_v_bucket(quant::f16_div(rh, s), boundaries, f.v_bits);
  __syncwarp();
  const int gb = quant::bitpack_bytes(quant::kTurboGroup, f.v_bits);
  store_group(s_idx + g * 32, f.v_bits, s_pack + g * 32, p.cache.v_data + row * f.v_row_bytes() + g * gb, lane);
  if (lane == 0) {
    p.cache.v_scale[row * f.n_groups() + g] = f32_to_f16(s);
  }
}

__global__ void __launch_bounds__(512) kv_encode_kernel(const KvEncodeCudaParams p, const float* signs,
                                                        float inv_sqrt, const float* boundaries) {
  __shared__ uint8_t s_idx[512];
  __shared__ uint8_t s_pack[512];  // [warp][32]: packed bytes of the warp's group
  __shared__ float s_x[512];
  // A programmatically launched successor (the decode attention, DecodeCudaParams::
  // programmatic_launch) may start now; it waits for this grid's writes before its reads.
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
  // Block b = (token b % n_tokens, kv head b / n_tokens): token fastest, as the 2-D grid
  // before run 13 (kv head fastest measured equal for turbo, 7 % slower for bf16).
  const int t = blockIdx.x % p.n_tokens, h = blockIdx.x / p.n_tokens, e = threadIdx.x;
  const int slot = p.slot_mapping[t];
  if (slot < 0) return;  // uniform per block
  const PagedKvFormat& f = p.cache.format;
  const int d = f.head_dim;
  const int64_t in = ((int64_t)t * p.cache.n_kv_heads + h) * d + e;
  const int ps = p.cache.page_size;  // a power of two (validated)
  const int64_t row = paged_row(slot / ps, p.cache.n_kv_heads, h, ps, slot & (ps - 1));
  if (f.bf16) {
    if (p.k) reinterpret_cast<uint16_t*>(p.cache.k_data)[row * d + e] = quant::bf16_kv_encode(p.k[in]);
    if (p.v) reinterpret_cast<uint16_t*>(p.cache.v_data)[row * d + e] = quant::bf16_kv_encode(p.v[in]);
    return;
  }
  if (p.k) encode_k(p, quant::sanitize_kv_input(p.k[in]), row, s_idx, s_pack);
  __syncthreads();  // s_idx and s_pack are reused by V
  if (p.v) encode_v(p, quant::sanitize_kv_input(p.v[in]), row, signs, inv_sqrt, boundaries, s_idx, s_x, s_pack);
}

}  // namespace

cudaError_t launch_kv_encode(const KvEncodeCudaParams& p, const float* signs, float inv_sqrt,
                             const float* boundaries, cudaStream_t stream) {
  if (p.n_tokens == 0) return cudaSuccess;
  const dim3 grid(p.n_tokens * p.cache.n_kv_heads);  // <= INT32_MAX (validated)
  kv_encode_kernel<<<grid, p.cache.format.head_dim, 0, stream>>>(p, signs, inv_sqrt, boundaries);
  return cudaGetLastError();
}

}  // namespace tkv::kernels::cuda_detail
