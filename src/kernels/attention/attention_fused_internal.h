// Internal to the fused paged attention: the per-segment row formats, the
// running softmax state and the per-ISA inner loop (attention_fused_kernels.inc,
// built for AVX2 and AVX-512 in attention_fused_avx2.cc / _avx512.cc). The
// driver (splits, threads, merge, un-rotation) is attention_fused_cpu.cc.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/attention/attention_quant.h"

namespace tkv::kernels::fused {

constexpr int kBlock = 32;     // keys per online-softmax step
constexpr int kMaxGroup = 16;  // query heads per kv head
constexpr int kTile = 8;       // query heads kept in registers at once
constexpr int kMaxDim = 512;

// Byte offsets of a row's planes, head_dim and the turbo centroids.
struct RowFmt {
  int64_t k_off = 0, v_off = 0, ks_off = 0, kz_off = 0, vs_off = 0, vz_off = 0;
  int head_dim = 0;
  const float* centroids = nullptr;  // [2^v_bits] turbo only, padded to 256 entries
  // Turbo v_bits <= 5: the int8 codebook of value_block_i8 (centroid ≈ v_i8[i] ·
  // v_i8_step; 64 entries repeating with period 2^v_bits; with signed V scales, the
  // absmax codebook's, entries 32..63 are the negated 0..31).
  const int8_t* v_i8 = nullptr;
  float v_i8_step = 0;
  bool v_signed_scales = false;  // KvScheme::v_absmax: V group scales may be negative
};

// kS*: symmetric turbo keys (KvScheme::k_symmetric), no zero plane.
enum class KId { kBf16, kF16, kT2, kT3, kT4, kT5, kT8s, kT8u, kS4, kS5, kS8, kA4, kA8 };
enum class VId { kBf16, kF16, kT1, kT2, kT3, kT4, kT5, kT8, kA4, kA8 };

// Every quantized key format is scored with the int8 query; bf16/f16 keys with fp32.
inline bool int8_keys(KId k) {
  return k != KId::kBf16 && k != KId::kF16;
}

// The int8 query of one head row: q ≈ qs · qq, qq = rint(q · inv) in [-127, 127],
// qs = max|q| / 127, inv = 127 / max|q| (both 0 for an all-zero row). One definition
// for the kernel and for the reference that emulates it (fused_int8_query_rows).
struct QScale {
  float qs, inv;
};
inline QScale query_scale(const float* q, int d) {  // q: [d]
  float amax = 0.0f;
  for (int e = 0; e < d; ++e) amax = std::max(amax, std::fabs(q[e]));
  return {amax / 127.0f, amax > 0.0f ? 127.0f / amax : 0.0f};
}
inline int quantize_query_elem(float q, const QScale& s) {
  return static_cast<int>(std::lrint(q * s.inv));
}

struct SegFmt {
  RowFmt row;
  int64_t row_bytes = 0;
  KId k = KId::kBf16;
  VId v = VId::kBf16;
  bool rotated = false;
  int v_bits = 0;
  bool v_i8 = false;  // V through value_block_i8 (FusedIsa::kAvx512Int8V)
};

// Running softmax state of one task: heads [G], accumulators [G, head_dim].
struct State {
  float m[kMaxGroup], l[kMaxGroup];
  float* acc_p;  // [G, d] original-domain V (bf16 / affine segments)
  float* acc_r;  // [G, d] rotated-domain V (turbo segments)
};

struct Ctx {
  const KvSegmentView* segs;
  const SegFmt* fmts;
  int n_segs;
  const AttnArgs* a;
  int group, head_dim, n_kv_heads;
  int64_t n_total;
  bool has_rot;
};

// Turbo V of nb rows with int8 dot products (AVX-512 VNNI; v_bits <= 5, head_dim % 64
// == 0: value_i8_supported): acc[g][e] += Σ_t p[g][t] · scale_t · c[idx_t,e] for nt
// heads, with the weights quantized to u8 per (block, group, head) and the centroids to
// the int8 codebook (attention_fused_vi8.cc). value_block_i8_ref: the same arithmetic
// in scalar code, bit for bit (the unit test's oracle).
struct Int8Codebook {
  int8_t q[64];  // q[i] ≈ c[i mod 2^v_bits] / step
  float step = 0;
};
// signed_half: q[i] for i < 32 is c[i mod 2^v_bits], q[32 + i] its negation (for signed
// V scales: the sign rides in index bit 5); else q repeats with period 2^v_bits.
Int8Codebook int8_codebook(const float* centroids, int v_bits, bool signed_half = false);
// turbo's (or, absmax, KvScheme::v_absmax's with signed_half), cached; null past 5 bits
const Int8Codebook* int8_codebook_for(int v_bits, bool absmax = false);
bool value_i8_supported(int v_bits, int head_dim);
void value_block_i8(int v_bits, const uint8_t* base, int64_t rb, int nb, int nt, const RowFmt& f,
                    const float (*p)[kBlock], float* const* acc);
void value_block_i8_ref(int v_bits, const uint8_t* base, int64_t rb, int nb, int nt,
                        const RowFmt& f, const float (*p)[kBlock], float* const* acc);

// Attends query i / kv head kh over keys [j0, j1) of every segment into st.
namespace avx2 {
void run_range(const Ctx& c, int64_t i, int kh, int64_t j0, int64_t j1, State& st);
}
namespace avx512 {
void run_range(const Ctx& c, int64_t i, int kh, int64_t j0, int64_t j1, State& st);
}

}  // namespace tkv::kernels::fused
