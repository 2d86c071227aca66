// Tensor-core fast path of the fused TurboQuant decode (k8v3/k8v4, head_dim 128, GQA
// tiles of 4 query heads): Q·K by mma.sync m16n8k16 f16 with exact int8 keys and
// power-of-two-scaled fp16 q (group scale/zero applied after: s = Σ_g s_g (Σ idx q + z_g Σ q)),
// P·V by the same mma with fp16 P and centroid·scale V (rotated domain, one FWHT in
// the reduce kernel). Error model and tolerance: tests/cuda/attention_cuda_test.cc;
// layout and design: docs/cuda-kernels.md. Formats: src/quant/turbo_k.h, turbo_v.h, bitpack.h.
#include "kernels/attention_cuda/decode_common.cuh"

namespace tkv::kernels::cuda_detail {
namespace {

constexpr int kD = 128;           // head_dim of this path
constexpr int kHeads = 4;         // query heads per block (one GQA tile)
constexpr int kTok = 64;          // tokens per pipeline stage (16 per warp)
constexpr int kMinBlocks = kMmaBlocksPerSm;  // resident blocks per SM the registers are capped for

__device__ __forceinline__ void mma16816(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                         uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t h2_bits(__half2 h) { return *reinterpret_cast<uint32_t*>(&h); }
__device__ __forceinline__ __half2 bits_h2(uint32_t u) { return *reinterpret_cast<__half2*>(&u); }

// Pair (ga, ga + 2) of the 4 fp16 group values of a token row (8 bytes at p) as floats.
__device__ __forceinline__ float2 group_pair(const uint8_t* p, int ga) {
  const uint2 w = *reinterpret_cast<const uint2*>(p);
  return __half22float2(bits_h2(__byte_perm(w.x, w.y, ga ? 0x7632 : 0x5410)));
}

// Lane (r = lane/4, c = lane%4) of the QK mma. A = q, rows ρ: ρ < 8 -> head ρ%4, group ρ/4;
// ρ >= 8 -> head ρ%4, group 2 + (ρ-8)/4 (q masked to that group, so one accumulator chain
// keeps the four group sums apart). K-step (g, hh) covers 16 dims of group g: lane c's
// k slots 2c,2c+1 / 2c+8,2c+9 are dims 32g+8c+4hh + {0,1} / {2,3}. B = K^T: token r of the
// n-tile, the 4-byte word at 32g+8c+4hh. C: rows r / r+8 = groups ga / ga+2, tokens 2c, 2c+1.
struct QFrag {
  uint32_t q[8];   // [ga/gb][hh][2]: fp16x2 of q·2^e, dims 32g + 8c + [0, 8)
  float qs_a, qs_b;  // Σ_{d in group} q·2^e for groups ga, gb of head h
  float smul;      // q_scale / 2^e
};

__device__ __forceinline__ QFrag load_q(const DecodeLaunch& a, int seq, int hq0, int lane) {
  const int r = lane >> 2, c = lane & 3, h = r & 3, ga = r >> 2;
  const uint16_t* qrow = a.p.q + ((int64_t)seq * a.p.n_heads + hq0 + h) * kD;
  float v[16];
#pragma unroll
  for (int s = 0; s < 2; ++s) {
    const uint4 w = __ldg(reinterpret_cast<const uint4*>(qrow + 32 * (ga + 2 * s) + 8 * c));
    const uint32_t ws[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
    for (int i = 0; i < 8; ++i) v[8 * s + i] = __uint_as_float(i % 2 ? ws[i / 2] & 0xffff0000u : ws[i / 2] << 16);
  }
  float mx = 0.0f;
#pragma unroll
  for (int i = 0; i < 16; ++i) mx = fmaxf(mx, fabsf(v[i]));
  mx = fmaxf(mx, __shfl_xor_sync(kFull, mx, 1));
  mx = fmaxf(mx, __shfl_xor_sync(kFull, mx, 2));
  mx = fmaxf(mx, __shfl_xor_sync(kFull, mx, 16));  // the 8 lanes of head h
  int ex = 0;
  frexpf(mx, &ex);                                  // mx in [2^(ex-1), 2^ex)
  const int e = mx > 0.0f ? max(-100, min(100, 15 - ex)) : 0;  // max |q|·2^e in [2^14, 2^15)
  const float f = ldexpf(1.0f, e);
  QFrag qf;
  float sa = 0.0f, sb = 0.0f;
#pragma unroll
  for (int i = 0; i < 16; ++i) {
    v[i] = __half2float(__float2half_rn(v[i] * f));  // exact but for |q| < 2^-24 max|q| (subnormal)
    (i < 8 ? sa : sb) += v[i];
  }
#pragma unroll
  for (int i = 0; i < 8; ++i) qf.q[i] = h2_bits(__floats2half2_rn(v[2 * i], v[2 * i + 1]));
  sa += __shfl_xor_sync(kFull, sa, 1), sb += __shfl_xor_sync(kFull, sb, 1);
  sa += __shfl_xor_sync(kFull, sa, 2), sb += __shfl_xor_sync(kFull, sb, 2);
  qf.qs_a = sa, qf.qs_b = sb, qf.smul = a.q_scale / f;
  return qf;
}

// Raw group sums of the QK mma for the 8-token n-tile at `tok` (K rows swizzled by
// issue_mma_tile): d[0..1] = groups ga of tokens 2c, 2c+1, d[2..3] = group ga+2.
__device__ __forceinline__ void qk_ntile(float (&d)[4], const QFrag& qf, const uint8_t* kpl, int tok, int lane,
                                         uint32_t kxor, __half2 koff) {
  const int r = lane >> 2, c = lane & 3, ga = r >> 2;
  d[0] = d[1] = d[2] = d[3] = 0.0f;
  const uint8_t* krow = kpl + (tok + r) * kD + 8 * (c & 1);
#pragma unroll
  for (int g = 0; g < 4; ++g) {
    const uint2 w = *reinterpret_cast<const uint2*>(krow + (((2 * g + (c >> 1)) ^ r) << 4));
    const uint32_t ww[2] = {w.x ^ kxor, w.y ^ kxor};  // signed: two's complement -> biased
    const bool mine = (g & 1) == ga;                   // rows of this lane hold group g
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {  // fp16 0x64uu = 1024 + u, minus 1024 (+128): exact idx
      const uint32_t b0 = h2_bits(__hsub2(bits_h2(__byte_perm(ww[hh], 0x64646464u, 0x4140)), koff));
      const uint32_t b1 = h2_bits(__hsub2(bits_h2(__byte_perm(ww[hh], 0x64646464u, 0x4342)), koff));
      const uint32_t x0 = mine ? qf.q[(g >> 1) * 4 + 2 * hh] : 0u;
      const uint32_t x1 = mine ? qf.q[(g >> 1) * 4 + 2 * hh + 1] : 0u;
      if (g < 2) {
        mma16816(d, x0, 0u, x1, 0u, b0, b1);
      } else {
        mma16816(d, 0u, x0, 0u, x1, b0, b1);
      }
    }
  }
}

// Copies the rows of tokens [t0, t0 + kTok) (clipped at t_end) into a stage: planes K,
// V, k scale, k zero, v scale as [kTok][row]; K's 16-byte units XOR-swizzled by token
// (unit u of token t lands at u ^ (t & 7)) so the QK loads are bank-conflict free.
template <int VR>
__device__ __forceinline__ void issue_mma_tile(const PagedKv& kv, uint8_t* stage, int t0, int t_end, int32_t page,
                                               int kvh) {
  const int tok = threadIdx.x >> 1, sub = threadIdx.x & 1, t = t0 + tok;
  if (t >= t_end) return;
  const int64_t row = ((int64_t)page * kv.page_size + (t & (kv.page_size - 1))) * kv.n_kv_heads + kvh;
  const uint8_t* ks = kv.k_data + row * kD;
#pragma unroll
  for (int u = sub; u < kD / 16; u += 2) cp_async(stage + tok * kD + ((u ^ (tok & 7)) << 4), ks + 16 * u, 16);
  uint8_t* vdst = stage + kTok * kD + tok * VR;
  const uint8_t* vsrc = kv.v_data + row * VR;
#pragma unroll
  for (int u = sub; u < VR / 16; u += 2) cp_async(vdst + 16 * u, vsrc + 16 * u, 16);
  uint8_t* sdst = stage + kTok * (kD + VR) + tok * 8;
  if (sub == 0) {
    cp_async(sdst, kv.k_scale + row * 4, 8);
    cp_async(sdst + kTok * 8, kv.k_zero + row * 4, 8);
  } else {
    cp_async(sdst + 2 * kTok * 8, kv.v_scale + row * 4, 8);
  }
}

// Page of this thread's token in the tile at t0 (0 past t_end): loaded a tile ahead of
// its copies, so the page-table latency is off the loop's critical path.
__device__ __forceinline__ int32_t tile_page(const int32_t* pages, int t0, int t_end, int ps_shift) {
  const int t = t0 + (threadIdx.x >> 1);
  return t < t_end ? __ldg(pages + (t >> ps_shift)) : 0;
}

// Writes the block's partial (m, l, acc) for its 4 heads: warps merged through shared memory.
__device__ __forceinline__ void write_partial(const DecodeLaunch& a, uint8_t* smem, const float (&acc)[8][4], float m,
                                              float l, int seq, int hq0, int part) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, r = lane >> 2, c = lane & 3;
  l += __shfl_xor_sync(kFull, l, 1);
  l += __shfl_xor_sync(kFull, l, 2);
  float* s_acc = reinterpret_cast<float*>(smem);  // [kWarps][kHeads][kD]
  float* s_ml = s_acc + kWarps * kHeads * kD;     // [kWarps][kHeads][2]
  if (c < 2) {  // columns 2c, 2c+1 are heads; c >= 2 hold duplicates
    float* h0 = s_acc + (warp * kHeads + 2 * c) * kD;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const int e = 16 * r + 2 * j;
      h0[e] = acc[j][0], h0[kD + e] = acc[j][1], h0[e + 1] = acc[j][2], h0[kD + e + 1] = acc[j][3];
    }
  }
  if (lane < 16 && c == 0) s_ml[2 * (warp * kHeads + r)] = m, s_ml[2 * (warp * kHeads + r) + 1] = l;
  __syncthreads();
  for (int idx = threadIdx.x; idx < kHeads * kD; idx += kThreads) {
    const int h = idx / kD, e = idx % kD;
    float mx = -INFINITY;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) mx = fmaxf(mx, s_ml[2 * (w * kHeads + h)]);
    float sum = 0.0f, lsum = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      const float mw = s_ml[2 * (w * kHeads + h)];
      const float cw = mw == -INFINITY ? 0.0f : fast_exp2(mw - mx);
      sum += s_acc[(w * kHeads + h) * kD + e] * cw;
      lsum += s_ml[2 * (w * kHeads + h) + 1] * cw;
    }
    const int64_t rec = ((int64_t)seq * a.p.n_heads + hq0 + h) * a.plan.n_parts + part;
    a.ws_acc[rec * kD + e] = sum;
    if (e == 0) a.ws_ml[2 * rec] = mx, a.ws_ml[2 * rec + 1] = lsum;
  }
}

// Online-softmax step for the warp's 16 tokens of head h (scores s, -inf = masked):
// rescales acc/l when the running max moves; returns P as fp16x2 B fragments.
__device__ __forceinline__ void softmax_step(float (&s)[4], float& m, float& l, float (&acc)[8][4], uint32_t& pb0,
                                             uint32_t& pb1, int lane) {
  const int c = lane & 3;
  float mx = fmaxf(fmaxf(s[0], s[1]), fmaxf(s[2], s[3]));
  mx = fmaxf(mx, __shfl_xor_sync(kFull, mx, 1));
  mx = fmaxf(mx, __shfl_xor_sync(kFull, mx, 2));
  const float mn = fmaxf(m, mx);
  if (__any_sync(kFull, mn > m)) {  // warp-uniform branch: the shuffles below need every lane
    const float corr = mn > m ? fast_exp2(m - mn) : 1.0f;  // m = -inf -> 0
    l *= corr;
    const float c0 = __shfl_sync(kFull, corr, (8 * c) & 31), c1 = __shfl_sync(kFull, corr, (8 * c + 4) & 31);
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[j][0] *= c0, acc[j][1] *= c1, acc[j][2] *= c0, acc[j][3] *= c1;
    m = mn;
  }
  float p[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    p[i] = s[i] > -INFINITY ? fast_exp2(s[i] - m) : 0.0f;
    l += p[i];
  }
  pb0 = h2_bits(__floats2half2_rn(p[0], p[1]));
  pb1 = h2_bits(__floats2half2_rn(p[2], p[3]));
}

// acc += V^T P for the warp's 16 tokens: A rows r / r+8 of m-tile j = dims 16r+2j / +1,
// k = tokens 2c, 2c+1 / 2c+8, 2c+9, values centroid[idx]·v_scale (fp16) from the pair table.
template <int VB>
__device__ __forceinline__ void pv_tile(float (&acc)[8][4], const uint8_t* vpl, const uint8_t* vsp,
                                        const uint32_t* tab, int tw, int n_valid, uint32_t pb0, uint32_t pb1, int lane) {
  constexpr int kVr = kD * VB / 8, kCb = 2 * VB, kPairBits = 2 * VB;  // row bytes, bytes of 16 dims, bits of 2
  const int r = lane >> 2, c = lane & 3;
  uint32_t w[4][(kCb + 3) / 4];
  uint32_t vs[4];
#pragma unroll
  for (int u = 0; u < 4; ++u) {
    const int t = tw + 2 * c + (u & 1) + 8 * (u >> 1);
    load_chunk<kCb>(vpl + t * kVr + kCb * r, w[u]);
    const uint32_t v = reinterpret_cast<const uint16_t*>(vsp + t * 8)[r >> 1];
    vs[u] = t - tw < n_valid ? v : 0u;  // stale rows of a clipped tile may hold Inf/NaN
  }
  const __half2 vab = bits_h2(vs[0] | vs[1] << 16), vcd = bits_h2(vs[2] | vs[3] << 16);
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    uint32_t hv[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) hv[u] = tab[stream_field<kPairBits>(w[u], j)];
    const uint32_t a0 = h2_bits(__hmul2(bits_h2(__byte_perm(hv[0], hv[1], 0x5410)), vab));
    const uint32_t a1 = h2_bits(__hmul2(bits_h2(__byte_perm(hv[0], hv[1], 0x7632)), vab));
    const uint32_t a2 = h2_bits(__hmul2(bits_h2(__byte_perm(hv[2], hv[3], 0x5410)), vcd));
    const uint32_t a3 = h2_bits(__hmul2(bits_h2(__byte_perm(hv[2], hv[3], 0x7632)), vcd));
    mma16816(acc[j], a0, a1, a2, a3, pb0, pb1);
  }
}

template <int VB>
__global__ void __launch_bounds__(kThreads, kMinBlocks) decode_turbo_mma_kernel(const DecodeLaunch a) {
  constexpr int kVr = kD * VB / 8, kStage = kTok * (kD + kVr + 24);
  extern __shared__ __align__(16) uint8_t smem[];
  __shared__ uint32_t s_tab[1 << (2 * VB)];  // fp16x2 (centroid[i & m], centroid[i >> VB])
  for (int i = threadIdx.x; i < (1 << (2 * VB)); i += kThreads)
    s_tab[i] = h2_bits(__floats2half2_rn(a.centroids[i & ((1 << VB) - 1)], a.centroids[i >> VB]));
  const PagedKv& kv = a.p.kv;
  const int part = blockIdx.x, seq = blockIdx.z;
  const int gqa = a.p.n_heads / kv.n_kv_heads, n_tiles_h = gqa / kHeads;
  const int kvh = blockIdx.y / n_tiles_h, hq0 = kvh * gqa + (blockIdx.y % n_tiles_h) * kHeads;
  const int seq_len = kv.seq_lens[seq], t_begin = part * a.plan.partition_tokens;
  if (t_begin >= seq_len) return;  // uniform per block: the reduce ignores this partition
  const int t_end = min(seq_len, t_begin + a.plan.partition_tokens);
  const int32_t* pages = kv.page_indices + kv.page_indptr[seq];
  const int ps_shift = __ffs(kv.page_size) - 1;
  const int n_tiles = (t_end - t_begin + kTok - 1) / kTok;
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < n_tiles)
      issue_mma_tile<kVr>(kv, smem + s * kStage, t_begin + s * kTok, t_end,
                          tile_page(pages, t_begin + s * kTok, t_end, ps_shift), kvh);
    cp_async_commit();
  }
  int32_t next_page = tile_page(pages, t_begin + (kStages - 1) * kTok, t_end, ps_shift);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, c = lane & 3, ga = (lane >> 2) >> 2;
  const QFrag qf = load_q(a, seq, hq0, lane);
  const uint32_t kxor = kv.format.k_signed ? 0x80808080u : 0u;
  const __half2 koff = __float2half2_rn(kv.format.k_signed ? 1152.0f : 1024.0f);
  float acc[8][4];
#pragma unroll
  for (int j = 0; j < 8; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;
  float m = -INFINITY, l = 0.0f;
  for (int it = 0; it < n_tiles; ++it) {
    cp_async_wait<kStages - 2>();
    __syncthreads();
    const int nxt = it + kStages - 1;
    if (nxt < n_tiles) {
      issue_mma_tile<kVr>(kv, smem + (nxt % kStages) * kStage, t_begin + nxt * kTok, t_end, next_page, kvh);
      next_page = tile_page(pages, t_begin + (nxt + 1) * kTok, t_end, ps_shift);
    }
    cp_async_commit();
    const uint8_t* st = smem + (it % kStages) * kStage;
    const uint8_t* ksp = st + kTok * (kD + kVr);
    const int tw = 16 * warp, n_valid = t_end - (t_begin + it * kTok + tw);  // may be <= 0
    float s[4];
#pragma unroll
    for (int nt = 0; nt < 2; ++nt) {
      float d[4];
      qk_ntile(d, qf, st, tw + 8 * nt, lane, kxor, koff);
#pragma unroll
      for (int u = 0; u < 2; ++u) {
        const int t = tw + 8 * nt + 2 * c + u;
        const float2 ksf = group_pair(ksp + t * 8, ga), kzf = group_pair(ksp + kTok * 8 + t * 8, ga);
        float x = fmaf(ksf.x, fmaf(kzf.x, qf.qs_a, d[u]), ksf.y * fmaf(kzf.y, qf.qs_b, d[2 + u]));
        x += __shfl_xor_sync(kFull, x, 16);  // + the other two groups
        s[2 * nt + u] = t - tw < n_valid ? x * qf.smul : -INFINITY;
      }
    }
    uint32_t pb0, pb1;
    softmax_step(s, m, l, acc, pb0, pb1, lane);
    pv_tile<VB>(acc, st + kTok * kD, ksp + 2 * kTok * 8, s_tab, tw, n_valid, pb0, pb1, lane);
  }
  cp_async_wait<0>();
  __syncthreads();  // the pipeline buffers become the cross-warp merge buffers
  if (lane >= 16) l = 0.0f;  // lanes 16..31 duplicate heads 0..3 of lanes 0..15
  write_partial(a, smem, acc, m, l, seq, hq0, part);
}

}  // namespace

cudaError_t launch_decode_turbo_mma(const DecodeLaunch& a, cudaStream_t stream) {
  const int gqa = a.p.n_heads / a.p.kv.n_kv_heads;
  const dim3 grid(a.plan.n_parts, a.p.kv.n_kv_heads * (gqa / kHeads), a.p.n_seqs);
  const int vb = a.p.kv.format.v_bits, stage = kTok * (kD + kD * vb / 8 + 24);
  const int merge = kWarps * kHeads * (kD + 2) * 4, smem = kStages * stage > merge ? kStages * stage : merge;
  if (vb == 3) {
    decode_turbo_mma_kernel<3><<<grid, kThreads, smem, stream>>>(a);
  } else {
    decode_turbo_mma_kernel<4><<<grid, kThreads, smem, stream>>>(a);
  }
  return cudaGetLastError();
}

}  // namespace tkv::kernels::cuda_detail
