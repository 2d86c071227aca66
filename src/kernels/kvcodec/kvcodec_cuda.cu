// CUDA encode kernel of the KV codec: thread e of a (token, kv head) block's K half
// (threads [0, d)) and of its V half ([d, 2d)) owns element e; warp g of a half is 32-group
// g. K: warp min/max, then quant::turbo_k_group_params and turbo_k_quantize per element;
// V: random-sign FWHT (butterflies of quant::fwht_stages, shuffles then shared memory),
// RMS over the group summed in index order as quant::turbo_v_encode_group,
// turbo_v_bucket; with KvScheme::v_mse_scale the group's warp then runs the search of
// quant::turbo_v_fit_scale, each lane its element, the sums by xor shuffles. Packing: the
// quant::bitpack_pack stream, one byte per lane. No fast-math anywhere: the bits equal
// kvcodec_encode_ref's.
#include "kernels/kvcodec/kvcodec_cuda.h"
#include "quant/turbo_v.h"

namespace tkv::kernels::cuda_detail {
namespace {

constexpr unsigned kFull = 0xffffffffu;

// Stores the warp's 32 indices (idx: the group's s_idx, values < 2^bits) as the
// quant::bitpack_pack stream at out[0, 32 * bits / 8): lane b builds byte b from the
// elements that overlap it (LSB-first, no element written twice, so the bytes equal
// bitpack_pack's ORs). 8-bit: each lane its own byte. Called by the whole warp after the
// indices are in shared memory (lane 0 packing all 32 ran serially before).
__device__ __forceinline__ void store_group(const uint8_t* idx, int bits, uint8_t* out, int lane) {
  if (bits == 8) {
    out[lane] = idx[lane];
    return;
  }
  if (lane >= quant::bitpack_bytes(quant::kTurboGroup, bits)) return;
  const int b0 = 8 * lane, i0 = b0 / bits, i1 = (b0 + 7) / bits;
  uint64_t w = 0;
  for (int i = i0; i <= i1; ++i) w |= (uint64_t)idx[i] << (i * bits - i0 * bits);
  out[lane] = (uint8_t)(w >> (b0 - i0 * bits));
}

// K of one element e (lane of warp g = 32-group g) of the row.
__device__ void encode_k(const KvEncodeCudaParams& p, float x, int e, int64_t row, uint8_t* s_idx) {
  const KvPageFormat& f = p.cache.format;
  const int lane = e % 32, g = e / 32;
  const bool sgn = f.scheme.k_bits == 8 && f.scheme.k_signed();
  float mn = x, mx = x;
  for (int off = 16; off > 0; off >>= 1) {
    mn = fminf(mn, __shfl_xor_sync(kFull, mn, off));
    mx = fmaxf(mx, __shfl_xor_sync(kFull, mx, off));
  }
  float s, zp;
  const bool regular = quant::turbo_k_group_params(mn, mx, f.scheme.k_bits, sgn, &s, &zp);
  s_idx[e] = regular ? quant::turbo_k_quantize(x, s, zp, f.scheme.k_bits, sgn) : 0;
  __syncwarp();
  const int gb = quant::bitpack_bytes(quant::kTurboGroup, f.scheme.k_bits);
  store_group(s_idx + g * 32, f.scheme.k_bits,
              p.cache.k_data + row * f.rows().k_data_bytes + g * gb, lane);
  if (lane == 0) {
    p.cache.k_scale[row * (f.head_dim() / quant::kTurboGroup) + g] = f32_to_f16(s);
    p.cache.k_zero[row * (f.head_dim() / quant::kTurboGroup) + g] = f32_to_f16(zp);
  }
}

// quant::turbo_v_fit_sum over the warp's 32 lanes (x[i] += x[i + h], h = 16 .. 1).
__device__ __forceinline__ float warp_fit_sum(float x) {
  for (int h = 16; h > 0; h >>= 1) x = quant::add_rn(x, __shfl_xor_sync(kFull, x, h));
  return x;
}

// Barrier of the V half's head_dim threads (named barrier 1; the K half never waits on it).
__device__ __forceinline__ void v_sync(int d) {
  asm volatile("bar.sync 1, %0;\n" ::"r"(d) : "memory");
}

// V of element e: x already times its sign; boundaries (and centroids, null unless the
// scheme fits its V scales) in shared memory.
__device__ void encode_v(const KvEncodeCudaParams& p, float x, int e, int64_t row, float inv_sqrt,
                         const float* boundaries, const float* centroids, uint8_t* s_idx,
                         float* s_x) {
  const KvPageFormat& f = p.cache.format;
  const int lane = e % 32, g = e / 32, d = f.head_dim();
  for (int h = 1; h < d; h <<= 1) {  // quant::fwht_stages: lower a+b, upper a-b, stage by stage
    float other;
    if (h < 32) {
      other = __shfl_xor_sync(kFull, x, h);
    } else {
      s_x[e] = x;
      v_sync(d);
      other = s_x[e ^ h];
      v_sync(d);
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
  float s = round_f16(sqrtf(quant::mul_rn(ss, 1.0f / 32.0f)));
  if (centroids) {
    // quant::turbo_v_fit_scale with this lane's element: every sum a xor-butterfly
    // (quant::turbo_v_fit_sum's order; a + b == b + a, so every lane gets the same bits).
    const int bits = f.scheme.v_bits;
    s = quant::turbo_v_fit_search(s, [&](float t) {
      const float c = centroids[quant::turbo_v_bucket(quant::f16_div(rh, t), boundaries, bits)];
      const float dv = quant::add_rn(rh, -quant::mul_rn(c, t));
      quant::TurboVFitPass q;
      q.err = warp_fit_sum(quant::mul_rn(dv, dv));
      q.num = warp_fit_sum(quant::mul_rn(rh, c));
      q.den = warp_fit_sum(quant::mul_rn(c, c));
      return q;
    });
  }
  s_idx[e] = (uint8_t)quant::turbo_v_bucket(quant::f16_div(rh, s), boundaries, f.scheme.v_bits);
  __syncwarp();
  const int gb = quant::bitpack_bytes(quant::kTurboGroup, f.scheme.v_bits);
  store_group(s_idx + g * 32, f.scheme.v_bits,
              p.cache.v_data + row * f.rows().v_data_bytes + g * gb, lane);
  if (lane == 0) {
    p.cache.v_scale[row * (f.head_dim() / quant::kTurboGroup) + g] = f32_to_f16(s);
  }
}

// Turbo: 2 head_dim threads, K by threads [0, d) and V by [d, 2d) side by side
// (they ran one after the other before). Every global read (slot, the input element, its sign, the
// codebook boundaries) is issued first, so the block waits for one DRAM trip, not four.
// bf16: head_dim threads, K and V stored per element.
__global__ void __launch_bounds__(1024)
    kv_encode_kernel(const KvEncodeCudaParams p, const float* signs, float inv_sqrt,
                     const float* boundaries, const float* centroids) {
  __shared__ uint8_t s_idx[2][512];
  __shared__ float s_x[512];
  __shared__ float s_bound[255];
  __shared__ float s_cent[256];
  // A programmatically launched successor (the decode attention, DecodeCudaParams::
  // programmatic_launch) may start now; it waits for this grid's writes before its reads.
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
  // Block b = (token b % n_tokens, kv head b / n_tokens): token fastest, as the 2-D grid
  // in an earlier layout (kv head fastest measured equal for turbo, 7 % slower for bf16).
  const int t = blockIdx.x % p.n_tokens, h = blockIdx.x / p.n_tokens;
  const KvPageFormat& f = p.cache.format;
  const int d = f.head_dim();
  const bool is_v = !f.is_float() && (int)threadIdx.x >= d;
  const int e = is_v ? threadIdx.x - d : threadIdx.x;
  const int64_t in = ((int64_t)t * p.cache.format.n_kv_heads + h) * d + e;
  const float* src = is_v ? p.v : p.k;
  const float x_in = src ? src[in] : 0.0f;  // loads in flight together: the input,
  const float v_in = f.is_float() && p.v ? p.v[in] : 0.0f;
  float sign = 1.0f;
  if (is_v) {
    sign = signs[e];  // its sign,
    for (int i = e; i < (1 << f.scheme.v_bits) - 1; i += d)
      s_bound[i] = boundaries[i];  // the codebook boundaries,
    for (int i = e; centroids && i < (1 << f.scheme.v_bits); i += d)
      s_cent[i] = centroids[i];  // the centroids when the V scale is fitted,
  }
  const int slot = p.slot_mapping[t];  // the slot
  if (is_v) v_sync(d);                 // s_bound, s_cent (turbo only: a bf16 block has no V half)
  if (slot < 0) return;                // uniform per block
  const int ps = p.cache.format.page_size;  // a power of two (validated)
  const int64_t row = paged_row(slot / ps, p.cache.format.n_kv_heads, h, ps, slot & (ps - 1));
  if (f.is_float()) {
    if (p.k) reinterpret_cast<uint16_t*>(p.cache.k_data)[row * d + e] = quant::bf16_kv_encode(x_in);
    if (p.v) reinterpret_cast<uint16_t*>(p.cache.v_data)[row * d + e] = quant::bf16_kv_encode(v_in);
    return;
  }
  if (!src) return;  // uniform per half (a V half without input never reaches a v_sync again)
  if (is_v)
    encode_v(p, quant::mul_rn(quant::sanitize_kv_input(x_in), sign), e, row, inv_sqrt, s_bound,
             centroids ? s_cent : nullptr, s_idx[1], s_x);
  else
    encode_k(p, quant::sanitize_kv_input(x_in), e, row, s_idx[0]);
}

}  // namespace

cudaError_t launch_kv_encode(const KvEncodeCudaParams& p, const float* signs, float inv_sqrt,
                             const float* boundaries, const float* centroids, cudaStream_t stream) {
  if (p.n_tokens == 0) return cudaSuccess;
  const dim3 grid(p.n_tokens * p.cache.format.n_kv_heads);  // <= INT32_MAX (validated)
  const int threads =
      p.cache.format.head_dim() * (p.cache.format.is_float() ? 1 : 2);  // turbo: K and V halves
  kv_encode_kernel<<<grid, threads, 0, stream>>>(p, signs, inv_sqrt, boundaries, centroids);
  return cudaGetLastError();
}

}  // namespace tkv::kernels::cuda_detail
