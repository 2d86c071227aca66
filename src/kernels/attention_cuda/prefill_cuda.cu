// Causal prefill attention over the paged cache, fp32 SIMT (prefill_cuda.h). A block
// owns (query tile, kv head, sequence): 64 query rows (tile tokens × GQA heads, row
// r = token * gqa + head, pre-scaled q in shared memory). Each K/V tile of kKT tokens
// is loaded once (the next tile's raw bytes are fetched into registers during the
// current one's P·V) and dequantized into fp32 shared memory, where all 64 rows
// use it: the reuse the one-query decode kernel run per token (each token re-reading
// its whole prefix) lacked. 256 threads; thread (rg, cl), rg = 16 row groups of 4
// rows, cl = 16 lanes of a half warp: scores of 4 rows × kKT/16 keys (keys cl + 16j),
// then P (in the K buffer, free by then) · V into 4 rows × float4 columns cl + 16c.
// The rows of a half warp are its own, so the online softmax's row max needs only
// shuffles among 16 lanes. Turbo: K = (idx + zero) · scale as the decode kernel
// computes idx + zero (exact), V = centroid · scale in the rotated domain, and the one
// inverse FWHT per output row at the end (quant::fwht_stages order, as the decode
// reduce). Same math as decode per token up to fp32 summation order.
#include "kernels/attention_cuda/decode_common.cuh"
#include "kernels/attention_cuda/prefill_cuda.h"
#include "quant/kv_math.h"

namespace tkv::kernels::cuda_detail {
namespace {

constexpr int kPThreads = 256;
constexpr int kRows = kPrefillRows;  // 16 row groups × 4 rows

template <int D>
struct Shape {
  static constexpr int kKT = D <= 128 ? 64 : 32;  // keys per tile
  static constexpr int kNK = kKT / 16;            // keys per thread in the scores
  static constexpr int kQS = D + 4;               // Q/K row stride (floats): +16 B, no conflicts
  static constexpr int kPS = kKT + 4;             // P row stride
  static constexpr int kDC = D / 64;              // float4 output columns per thread
  static constexpr int kGroups = D / 32;          // 32-element groups per row
  static constexpr int kMinBlocks = D <= 128 ? 2 : 1;
  static constexpr int kSmem = (kRows * kQS + kKT * kQS + kKT * D) * 4;
  static_assert(kRows * kPS <= kKT * kQS, "P fits the K buffer");
  static_assert(kKT * kGroups <= kPThreads, "one load item per thread");
};

// Raw bytes of one (token, 32-group) item: K and V words (turbo: k_bits / v_bits words;
// bf16: 16 each) and turbo's three fp16 scales.
struct Raw {
  uint32_t k[16], v[16];
  uint16_t ks, kz, vs;
  bool ok;
};

template <int B>
__device__ __forceinline__ void unpack32(const uint32_t (&w)[16], uint32_t (&idx)[32]) {
#pragma unroll
  for (int i = 0; i < 32; ++i) {  // field i of the LSB-first stream (quant/bitpack.h)
    const int bit = i * B, wi = bit / 32, sh = bit % 32;
    uint32_t x = w[wi] >> sh;
    if (sh + B > 32) x = __funnelshift_r(w[wi], w[wi + 1], sh);
    idx[i] = x & ((1u << B) - 1u);
  }
}

// Block-uniform switch over the width (kept out of the compute loops: one code path each).
__device__ __forceinline__ void unpack(int b, const uint32_t (&w)[16], uint32_t (&idx)[32]) {
  switch (b) {
    case 1:
      unpack32<1>(w, idx);
      break;
    case 2:
      unpack32<2>(w, idx);
      break;
    case 3:
      unpack32<3>(w, idx);
      break;
    case 4:
      unpack32<4>(w, idx);
      break;
    case 5:
      unpack32<5>(w, idx);
      break;
    default:
      unpack32<8>(w, idx);
      break;
  }
}

struct Ctx {
  const int32_t* pages;
  int ps_shift, kvh, t_lim;
};

template <int D, bool kBf16>
__device__ __forceinline__ void load_raw(Raw& r, const PrefillLaunch& a, const Ctx& c, int t0) {
  using S = Shape<D>;
  const PagedKv& kv = a.p.kv;
  const int item = threadIdx.x, tok = item / S::kGroups, g = item % S::kGroups, t = t0 + tok;
  r.ok = item < S::kKT * S::kGroups && t < c.t_lim;
  if (!r.ok) return;
  const int ps = kv.format.page_size;
  const int64_t row =
      paged_row(c.pages[t >> c.ps_shift], kv.format.n_kv_heads, c.kvh, ps, t & (ps - 1));
  if constexpr (kBf16) {
    const uint4* ks = reinterpret_cast<const uint4*>(kv.k_data + row * (D * 2) + g * 64);
    const uint4* vs = reinterpret_cast<const uint4*>(kv.v_data + row * (D * 2) + g * 64);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const uint4 x = __ldg(ks + i), y = __ldg(vs + i);
      r.k[4 * i] = x.x, r.k[4 * i + 1] = x.y, r.k[4 * i + 2] = x.z, r.k[4 * i + 3] = x.w;
      r.v[4 * i] = y.x, r.v[4 * i + 1] = y.y, r.v[4 * i + 2] = y.z, r.v[4 * i + 3] = y.w;
    }
  } else {
    const int kb = kv.format.scheme.k_bits, vb = kv.format.scheme.v_bits;
    const uint32_t* ks = reinterpret_cast<const uint32_t*>(kv.k_data + row * (D * kb / 8)) + g * kb;
    const uint32_t* vs = reinterpret_cast<const uint32_t*>(kv.v_data + row * (D * vb / 8)) + g * vb;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      r.k[i] = i < kb ? __ldg(ks + i) : 0u;
      r.v[i] = i < vb ? __ldg(vs + i) : 0u;
    }
    r.k[8] = r.v[8] = 0u;  // read past the last word by unpack32's funnel shift, never used
    const int64_t s = row * S::kGroups + g;
    r.ks = __ldg(kv.k_scale + s), r.kz = __ldg(kv.k_zero + s), r.vs = __ldg(kv.v_scale + s);
  }
}

// Dequantizes item r into K (row stride kQS) and V (stride D) in shared memory; tokens
// past the tile's last needed key get zeros (a stale row may hold NaN; P = 0 keeps no NaN out).
template <int D, bool kBf16>
__device__ __forceinline__ void store_raw(const Raw& r, const PrefillLaunch& a, const float* cent,
                                          float* Ks, float* Vs) {
  using S = Shape<D>;
  const int item = threadIdx.x, tok = item / S::kGroups, g = item % S::kGroups;
  if (item >= S::kKT * S::kGroups) return;
  float* kd = Ks + tok * S::kQS + g * 32;
  float* vd = Vs + tok * D + g * 32;
  // Stored 4 at a time (a whole row of 32 in registers next to the accumulators spilled).
  auto put = [](float* dst, int i, float x0, float x1, float x2, float x3) {
    *reinterpret_cast<float4*>(dst + i) = make_float4(x0, x1, x2, x3);
  };
  if (!r.ok) {
#pragma unroll
    for (int i = 0; i < 32; i += 4) put(kd, i, 0.f, 0.f, 0.f, 0.f), put(vd, i, 0.f, 0.f, 0.f, 0.f);
  } else if constexpr (kBf16) {
    auto bf = [](const uint32_t(&w)[16], int i) {
      return __uint_as_float(i % 2 ? w[i / 2] & 0xffff0000u : w[i / 2] << 16);
    };
#pragma unroll
    for (int i = 0; i < 32; i += 4) {
      put(kd, i, bf(r.k, i), bf(r.k, i + 1), bf(r.k, i + 2), bf(r.k, i + 3));
      put(vd, i, bf(r.v, i), bf(r.v, i + 1), bf(r.v, i + 2), bf(r.v, i + 3));
    }
  } else {
    const quant::KvScheme& f = a.p.kv.format.scheme;
    const bool sgn = f.k_bits == 8 && f.k_signed();
    // idx + zero exactly as the decode kernel: float(2^23 + biased idx) - (2^23 + bias - zero)
    const float off = __fsub_rn(sgn ? 8388736.0f : 8388608.0f, h2f(r.kz));
    const uint32_t kx = sgn ? 0x80u : 0u;
    const float ks = h2f(r.ks), vs = h2f(r.vs);
    uint32_t idx[32];
    unpack(f.k_bits, r.k, idx);
    auto kq = [&](int i) {
      return __fmul_rn(__fsub_rn(__uint_as_float(0x4b000000u | (idx[i] ^ kx)), off), ks);
    };
#pragma unroll
    for (int i = 0; i < 32; i += 4) put(kd, i, kq(i), kq(i + 1), kq(i + 2), kq(i + 3));
    unpack(f.v_bits, r.v, idx);
    auto vq = [&](int i) { return __fmul_rn(cent[idx[i]], vs); };
#pragma unroll
    for (int i = 0; i < 32; i += 4) put(vd, i, vq(i), vq(i + 1), vq(i + 2), vq(i + 3));
  }
}

template <int D, bool kBf16>
__global__ void __launch_bounds__(kPThreads, Shape<D>::kMinBlocks)
    prefill_kernel(const PrefillLaunch a) {
  using S = Shape<D>;
  extern __shared__ __align__(16) float smem[];
  float* Qs = smem;                  // [kRows][kQS] q · q_scale; the FWHT rows at the end
  float* Ks = Qs + kRows * S::kQS;   // [kKT][kQS] K; then P [kRows][kPS]
  float* Vs = Ks + S::kKT * S::kQS;  // [kKT][D] V (turbo: rotated domain)
  __shared__ float s_cent[256];
  __shared__ float s_l[kRows];
  const PagedKv& kv = a.p.kv;
  const int seq = blockIdx.z, kvh = blockIdx.y, tq0 = blockIdx.x * a.q_tile;
  const int q_len = a.p.q_lens[seq];
  if (tq0 >= q_len) return;  // uniform: the ragged batch's shorter chunks
  const int seq_len = kv.seq_lens[seq], pos0 = seq_len - q_len;
  const int G = a.gqa, n_tok = min(a.q_tile, q_len - tq0), R = n_tok * G;
  const int64_t q_row0 = a.p.q_offsets[seq] + tq0;
  const Ctx c{kv.seq_pages(seq), __ffs(kv.format.page_size) - 1, kvh, pos0 + tq0 + n_tok};
  const int tid = threadIdx.x;
  if constexpr (!kBf16) {
    for (int i = tid; i < (1 << kv.format.scheme.v_bits); i += kPThreads)
      s_cent[i] = a.centroids[i];
  }
  for (int i = tid; i < kRows * (D / 4); i += kPThreads) {
    const int r = i / (D / 4), col = 4 * (i % (D / 4));
    float4 x = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (r < R) {
      x = __ldg(reinterpret_cast<const float4*>(
          a.p.q + ((q_row0 + r / G) * a.p.n_heads + kvh * G + r % G) * D + col));
      x.x *= a.q_scale, x.y *= a.q_scale, x.z *= a.q_scale, x.w *= a.q_scale;
    }
    *reinterpret_cast<float4*>(Qs + r * S::kQS + col) = x;
  }
  Raw raw;
  load_raw<D, kBf16>(raw, a, c, 0);

  const int lane = tid % 32, rg = (tid / 32) * 2 + lane / 16, cl = lane % 16;
  int pos[4];  // position of each of the thread's rows; -1: no such row (masked entirely)
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int r = rg * 4 + i;
    pos[i] = r < R ? pos0 + tq0 + r / G : -1;
  }
  float m[4], l[4], acc[4][S::kDC][4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    m[i] = -INFINITY, l[i] = 0.0f;
#pragma unroll
    for (int cc = 0; cc < S::kDC; ++cc)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][cc][e] = 0.0f;
  }
  const int n_kt = (c.t_lim + S::kKT - 1) / S::kKT;
  for (int kt = 0; kt < n_kt; ++kt) {
    const int t0 = kt * S::kKT;
    __syncthreads();  // the previous tile's P·V is done with P and V (first: Q, centroids)
    store_raw<D, kBf16>(raw, a, s_cent, Ks, Vs);
    __syncthreads();
    float s[4][S::kNK];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int j = 0; j < S::kNK; ++j) s[i][j] = 0.0f;
#pragma unroll 1
    for (int dd = 0; dd < D; dd += 4) {
      float4 q4[4], k4[S::kNK];
#pragma unroll
      for (int i = 0; i < 4; ++i)
        q4[i] = *reinterpret_cast<const float4*>(Qs + (rg * 4 + i) * S::kQS + dd);
#pragma unroll
      for (int j = 0; j < S::kNK; ++j)
        k4[j] = *reinterpret_cast<const float4*>(Ks + (cl + 16 * j) * S::kQS + dd);
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < S::kNK; ++j) {
          s[i][j] = fmaf(q4[i].x, k4[j].x, s[i][j]);
          s[i][j] = fmaf(q4[i].y, k4[j].y, s[i][j]);
          s[i][j] = fmaf(q4[i].z, k4[j].z, s[i][j]);
          s[i][j] = fmaf(q4[i].w, k4[j].w, s[i][j]);
        }
    }
    // Causal mask and the online softmax (exp2 domain) of each row over this tile.
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      float mx = m[i];
#pragma unroll
      for (int j = 0; j < S::kNK; ++j) {
        if (t0 + cl + 16 * j > pos[i]) s[i][j] = -INFINITY;
        mx = fmaxf(mx, s[i][j]);
      }
#pragma unroll
      for (int off = 1; off < 16; off <<= 1) mx = fmaxf(mx, __shfl_xor_sync(kFull, mx, off));
      const float cr = mx == -INFINITY ? 1.0f : fast_exp2(m[i] - mx);
      m[i] = mx;
      l[i] *= cr;
#pragma unroll
      for (int cc = 0; cc < S::kDC; ++cc)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[i][cc][e] *= cr;
#pragma unroll
      for (int j = 0; j < S::kNK; ++j) {
        s[i][j] = mx == -INFINITY ? 0.0f : fast_exp2(s[i][j] - mx);
        l[i] += s[i][j];
      }
    }
    __syncthreads();  // every score has read K: its buffer takes P
    float* Ps = Ks;
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int j = 0; j < S::kNK; ++j) Ps[(rg * 4 + i) * S::kPS + cl + 16 * j] = s[i][j];
    __syncthreads();
    // The next tile's bytes fly during P·V (the scores' registers are free by now).
    if (kt + 1 < n_kt) load_raw<D, kBf16>(raw, a, c, t0 + S::kKT);
#pragma unroll 2
    for (int k = 0; k < S::kKT; k += 4) {
      float4 p4[4];
#pragma unroll
      for (int i = 0; i < 4; ++i)
        p4[i] = *reinterpret_cast<const float4*>(Ps + (rg * 4 + i) * S::kPS + k);
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
#pragma unroll
        for (int cc = 0; cc < S::kDC; ++cc) {
          const float4 v = *reinterpret_cast<const float4*>(Vs + (k + kk) * D + cc * 64 + cl * 4);
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            const float p = kk == 0 ? p4[i].x : kk == 1 ? p4[i].y : kk == 2 ? p4[i].z : p4[i].w;
            acc[i][cc][0] = fmaf(p, v.x, acc[i][cc][0]);
            acc[i][cc][1] = fmaf(p, v.y, acc[i][cc][1]);
            acc[i][cc][2] = fmaf(p, v.z, acc[i][cc][2]);
            acc[i][cc][3] = fmaf(p, v.w, acc[i][cc][3]);
          }
        }
      }
    }
  }
  // The row sums over the 16 lanes that share the rows (same m, so plain sums).
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int off = 1; off < 16; off <<= 1) l[i] += __shfl_xor_sync(kFull, l[i], off);
  auto out_at = [&](int r, int e) -> float* {
    return a.p.out + ((q_row0 + r / G) * a.p.n_heads + kvh * G + r % G) * D + e;
  };
  if constexpr (kBf16) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int r = rg * 4 + i;
      if (r >= R) continue;
#pragma unroll
      for (int cc = 0; cc < S::kDC; ++cc) {
        float y[4];
#pragma unroll
        for (int e = 0; e < 4; ++e) y[e] = l[i] > 0.0f ? acc[i][cc][e] / l[i] : 0.0f;
        *reinterpret_cast<float4*>(out_at(r, cc * 64 + cl * 4)) =
            make_float4(y[0], y[1], y[2], y[3]);
      }
    }
  } else {
    // Turbo: the un-normalised rows in shared memory (Q's buffer: every score is done,
    // the loop's last barrier passed), the inverse FWHT, then × sign/√D and 1/l as the
    // decode reduce does.
    float* X = Qs;  // [kRows][D]
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int r = rg * 4 + i;
#pragma unroll
      for (int cc = 0; cc < S::kDC; ++cc)
        *reinterpret_cast<float4*>(X + r * D + cc * 64 + cl * 4) =
            make_float4(acc[i][cc][0], acc[i][cc][1], acc[i][cc][2], acc[i][cc][3]);
      if (cl == 0) s_l[r] = l[i];
    }
    __syncthreads();
    for (int h = 1; h < D; h <<= 1) {  // stage order and pairing of quant::fwht_stages
      for (int i = tid; i < R * (D / 2); i += kPThreads) {
        const int r = i / (D / 2), pi = i % (D / 2);
        const int e0 = ((pi & ~(h - 1)) << 1) | (pi & (h - 1)), e1 = e0 | h;
        const float x0 = X[r * D + e0], x1 = X[r * D + e1];
        X[r * D + e0] = quant::add_rn(x0, x1);
        X[r * D + e1] = quant::add_rn(x0, -x1);
      }
      __syncthreads();
    }
    for (int i = tid; i < R * D; i += kPThreads) {
      const int r = i / D, e = i % D;
      const float x = quant::mul_rn(X[i], quant::mul_rn(a.inv_sqrt, a.signs[e]));
      *out_at(r, e) = s_l[r] > 0.0f ? x / s_l[r] : 0.0f;
    }
  }
}

template <int D, bool kBf16>
cudaError_t launch_d(const PrefillLaunch& a, dim3 grid, cudaStream_t stream) {
  constexpr int smem = Shape<D>::kSmem;
  static bool raised = false;  // the opt-in above 48 KiB, once per instantiation
  if (!raised) {
    const cudaError_t e = cudaFuncSetAttribute(prefill_kernel<D, kBf16>,
                                               cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (e != cudaSuccess) return e;
    raised = true;
  }
  prefill_kernel<D, kBf16><<<grid, kPThreads, smem, stream>>>(a);
  return cudaGetLastError();
}

template <bool kBf16>
cudaError_t launch_fmt(const PrefillLaunch& a, dim3 grid, cudaStream_t stream) {
  switch (a.p.kv.format.head_dim()) {
    case 64:
      return launch_d<64, kBf16>(a, grid, stream);
    case 128:
      return launch_d<128, kBf16>(a, grid, stream);
    case 256:
      return launch_d<256, kBf16>(a, grid, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace

cudaError_t launch_prefill(const PrefillLaunch& a, cudaStream_t stream) {
  const dim3 grid((a.p.max_q_len + a.q_tile - 1) / a.q_tile, a.p.kv.format.n_kv_heads, a.p.n_seqs);
  return a.p.kv.format.is_float() ? launch_fmt<true>(a, grid, stream)
                                  : launch_fmt<false>(a, grid, stream);
}

}  // namespace tkv::kernels::cuda_detail
