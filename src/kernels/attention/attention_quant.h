// Attention over a paged, possibly quantized KV cache (bf16, affine, TurboQuant),
// spec turboquant-codec.md §4. A sequence is a list of segments (e.g. a bf16
// prefix from --kv-quant-start, then the quantized rest), each a KvSegmentView of
// host pages in the one page format (kv_page.h).
#pragma once
#include <cstdint>

#include "base/thread_pool.h"
#include "kernels/attention/attention.h"
#include "kernels/attention/kv_page.h"
#include "quant/kv_scheme.h"

namespace tkv::kernels {

// Tail padding every pool must have past its last page (the SIMD unpack over-reads).
constexpr int64_t kKvPoolTailPad = 16;

// The segments' K/V dequantized with the codec's kvcodec_dequant_ref (V un-rotated)
// into k, v: [n_total, n_kv_heads, head_dim] (released pages read as zeros).
void kv_segments_dequant(const KvSegmentView* segs, int n_segs, float* k, float* v);

// Which query the reference scores keys with: the fp32 query, or per segment the
// one the fused kernel dots with (its int8 query on quantized keys, see
// fused_int8_query), which leaves fused vs reference to fp32 rounding alone.
enum class RefQuery { kFp32, kAsFused };

// Reference (oracle, fallback): kv_segments_dequant, then attention_f32_ref.
// segs cover positions [0, n_total) in order.
void attention_paged_ref(const KvSegmentView* segs, int n_segs, const AttnArgs& a,
                         RefQuery rq = RefQuery::kFp32);

// Fused: attends directly over the packed rows (quantized K dotted as integers
// with the int8 query below, bf16/f16 K in fp32; online softmax, turbo V
// accumulated in the rotated domain and un-rotated once per (query, head) row),
// threads over (query, kv head) tasks and KV splits with a log-sum-exp merge
// (flash-decoding) when there are too few tasks.
// The inner loop runs 16-lane AVX-512 when the CPU has it and head_dim % 16 == 0, else
// 8-lane AVX2. On AVX-512, kAvx512Int8V (what kAuto picks) accumulates turbo V of <= 5
// bits with int8 dot products (u8 weights per block, an int8 codebook: error in
// attention_fused_bound.h), kAvx512 in fp32; TKV_FUSED_ISA=avx2|avx512 caps kAuto (for
// benchmarks); tests force each.
enum class FusedIsa { kAuto, kAvx2, kAvx512, kAvx512Int8V };
bool fused_has_avx512();
FusedIsa fused_auto_isa(int head_dim);  // what kAuto runs
// The fused kernel scores quantized keys (affine, turbo) with a per-head int8 query,
// qs · rint(q / qs), qs = max|q| / 127; bf16/f16 keys with the fp32 query.
bool fused_int8_query(const KvSegmentView& seg);
// kAvx512Int8V accumulates this segment's V with int8 dots (turbo, v_bits <= 5,
// head_dim % 64 == 0).
bool fused_int8_values(const KvSegmentView& seg);
// That int8 query as fp32, row by row: q, out: [n_rows, head_dim].
void fused_int8_query_rows(const float* q, int64_t n_rows, int head_dim, float* out);
void attention_paged_fused_cpu(const KvSegmentView* segs, int n_segs, const AttnArgs& a,
                               ThreadPool& pool, FusedIsa isa = FusedIsa::kAuto);
// Several calls (one per sequence of a batched step) in one pass over the pool: every
// call's (query, kv head[, split]) tasks are handed out together, so a step of many
// short decode rows pays two pool barriers instead of two per call. Each call is split
// and computed exactly as attention_paged_fused_cpu would alone (same floats).
struct FusedCall {
  const KvSegmentView* segs = nullptr;
  int n_segs = 0;
  AttnArgs a;
};
void attention_paged_fused_cpu_batch(const FusedCall* calls, int n_calls, ThreadPool& pool,
                                     FusedIsa isa = FusedIsa::kAuto);

}  // namespace tkv::kernels
