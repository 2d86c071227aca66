// Derived bound on |fused - reference| for one paged attention call
// (attention_paged_fused_cpu vs attention_paged_ref on the same stored K/V): the
// tolerance of the kernel's tests and kvcache tests, and what --kv-attn verify
// (ops::AttnCheckLog) measures the int8 query's deviation against. House rule for
// reductions: sqrt(K) u |a||b|, u = 2^-24, a factor 2 margin.
#pragma once
#include <cstdint>

#include "kernels/attention/attention_quant.h"

namespace tkv::kernels {

// fp32 order: both see the same dequantized K/V and differ by summation order
// (scores: d terms; outputs: n_kv terms plus one rescale per block), the exp
// polynomial (< 4 ulp) and, for turbo, one deferred FWHT (log2 d stages) instead of
// one per row:
//   |δs| <= 2 sqrt(d) u Σ|q k|, and softmax moves o by <= 2 |δs| Vmax;
//   V sums: 2 sqrt(n_kv) u Vmax + 8 u Vmax (exp, rescales);
//   FWHT: 2 sqrt(log2 d) u sqrt(d) Rmax (each stage adds u on |acc| <= sqrt(d) Rmax).
// int8 query (segments where fused_int8_query): q ≈ qs · qq, qs = max|q|/127, each
// element off by <= qs/2, so a score moves by
//   |δs_q| <= scale · (qs/2) · Σ_e |k̂_e|                   (q8_ds_max, per head and key);
// its fp32 evaluation Σ_groups (s·Σ qq·idx + b·Σ qq), k̂ = idx·s + b per group (b the
// kernel's group offset), sums terms of magnitude qs |qq_e| (|idx_e s| + |b|), so at most
//   scale · Σ_e (|q_e| + qs/2) (|k̂_e - b_g| + |b_g|)          (q8_mag_max, per head and key),
// adding 2 sqrt(d) u of that (the zero-point folding cancels large terms, hence |b|).
// Scores all moving by <= ε move the softmax weights by Σ|δp| <= e^{2ε} - 1, hence the
// output by <= expm1(2ε) · Vmax. Against RefQuery::kAsFused the reference dots with
// the int8 query itself, so only the fp32 part of ε remains.
// int8 V dot (FusedIsa::kAvx512Int8V, turbo v_bits <= 5, attention_fused_vi8.cc): per
// block of <= 32 keys each weight w = p·s is stored as u8 against the block's largest,
// |δw| <= wmax_b / 510, and each centroid as q · step, |δc| <= step / 2. A rotated
// accumulator then moves by Σ_t (|δw_t| |ĉ_t,e| + w_t step/2) / l, and an output
// element (orthonormal un-rotation) by that summed over e, / sqrt(d). wmax_b is at most
// the largest p·s within 31 keys of t (any block holding t), so per (query, head)
//   ε_V = Σ_t [win_t (‖c_t‖₁ + d step/2) / 510 + p_t s_t d step/2] / (l sqrt(d)),
// win_t = max p·s over keys t-31..t+31 (s the row's largest group scale, ‖c_t‖₁ its
// centroids' L1); the fused weights are the reference's within e^{2ε} (scores off by ε).
// Added, twice, where isa is (or kAuto picks) kAvx512Int8V.
struct FusedBoundInputs {
  double qk_abs_max = 0;  // max over (query head, visible key) of scale · Σ_e |q_e k_e|
  double v_max = 0;       // max |v̂| (original domain)
  double r_max = 0;       // max |ṽ| (turbo rotated domain), 0 otherwise
  double v_i8_max = 0;    // int8 V dot: max over (query, head) of ε_V
  double q8_ds_max = 0;   // int8 query: max over (head, key) of scale · qs/2 · Σ_e |k̂_e|
  double q8_mag_max = 0;  // int8 query: max over (head, key) of the fp32 terms' magnitude
};

double fused_bound(const FusedBoundInputs& t, int head_dim, int64_t n_kv,
                   RefQuery rq = RefQuery::kFp32, FusedIsa isa = FusedIsa::kAuto);

// The inputs measured on one call: the segments' stored K/V (dequantized, plus the
// turbo rotated V and the int8 path's group scales) and the query, over the keys each
// query sees.
FusedBoundInputs fused_bound_inputs(const KvSegmentView* segs, int n_segs, const AttnArgs& a);

// The int8 V dot's term alone (2 ε_V, scores as the fp32-V kernel's): the bound on the
// kAvx512Int8V output against the kAvx512 one on the same call.
double fused_v_i8_bound(const FusedBoundInputs& t);

// fused_bound(fused_bound_inputs(...)) for the call's n_total keys.
double fused_attention_bound(const KvSegmentView* segs, int n_segs, const AttnArgs& a,
                             RefQuery rq = RefQuery::kFp32);

}  // namespace tkv::kernels
