// Fused attention over paged bf16 / affine / TurboQuant segments on the CPU
// (spec turboquant-codec.md §4, flash-decoding split-KV): per (query token, kv
// head[, KV split]) task, quantized K rows are dotted as integers with the GQA
// group's int8 queries (bf16/f16 rows in fp32), softmax is online (exp domain),
// turbo V is accumulated in the rotated domain and un-rotated once per output
// row. This file is the driver (formats, splits, threads, merge, un-rotation);
// the inner loop is attention_fused_kernels.inc, built for AVX2 and AVX-512 and
// picked at run time.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "base/check.h"
#include "kernels/attention/attention_fused_internal.h"
#include "kernels/attention/attention_quant.h"
#include "quant/fwht.h"
#include "quant/turbo_tables.h"

namespace tkv::kernels {
namespace {

using fused::Ctx;
using fused::KId;
using fused::RowFmt;
using fused::SegFmt;
using fused::State;
using fused::VId;
constexpr int kBlock = fused::kBlock;
constexpr int kMaxGroup = fused::kMaxGroup;
constexpr int kMaxDim = fused::kMaxDim;
constexpr int64_t kMinParallelElems = int64_t{1}
                                      << 19;  // key elements below which one thread runs it all

// Centroids padded to 256 entries so the 8-lane table lookups never read past them.
struct PaddedCentroids {
  alignas(32) float c[256] = {};
};
const float* padded_centroids(int v_bits, bool absmax) {
  static const auto tables = [] {
    std::vector<PaddedCentroids> t(18);  // [absmax][v_bits]
    for (int a : {0, 1})
      for (int b : {1, 2, 3, 4, 5, 8})
        if (const float* c = a ? quant::turbo_absmax_centroids(b) : quant::turbo_centroids(b))
          for (int i = 0; i < (1 << b); ++i) t[static_cast<size_t>(9 * a + b)].c[i] = c[i];
    return t;
  }();
  return tables[static_cast<size_t>(9 * (absmax ? 1 : 0) + v_bits)].c;
}

SegFmt seg_format(const KvSegmentView& s) {
  SegFmt f;
  f.row.head_dim = s.format.head_dim();
  f.row_bytes = s.format.rows().row_bytes;
  if (s.format.is_float()) {
    f.row.v_off = 2 * s.format.head_dim();
    if (s.format.scheme.kind == quant::KvKind::kF16) f.k = KId::kF16, f.v = VId::kF16;
    return f;
  }
  const quant::KvRowLayout l = quant::kv_row_layout(s.format.scheme);
  f.row = {l.k_data_offset,  l.v_data_offset, l.k_scale_offset,    l.k_zero_offset,
           l.v_scale_offset, l.v_zero_offset, s.format.head_dim(), nullptr};
  const int kb = s.format.scheme.k_bits, vb = s.format.scheme.v_bits;
  if (s.format.scheme.kind == quant::KvKind::kAffine) {
    f.k = kb == 8 ? KId::kA8 : KId::kA4;
    f.v = vb == 8 ? VId::kA8 : VId::kA4;
    return f;
  }
  TKV_CHECK(s.format.scheme.kind == quant::KvKind::kTurbo);
  if (s.format.scheme.k_symmetric)
    f.k = kb == 4 ? KId::kS4 : kb == 5 ? KId::kS5 : KId::kS8;
  else
    f.k = kb == 2                      ? KId::kT2
          : kb == 3                    ? KId::kT3
          : kb == 4                    ? KId::kT4
          : kb == 5                    ? KId::kT5
          : s.format.scheme.k_signed() ? KId::kT8s
                                       : KId::kT8u;
  f.v = vb == 1   ? VId::kT1
        : vb == 2 ? VId::kT2
        : vb == 3 ? VId::kT3
        : vb == 4 ? VId::kT4
        : vb == 5 ? VId::kT5
                  : VId::kT8;
  f.row.centroids = padded_centroids(vb, s.format.scheme.v_absmax);
  // The absmax codebook's V scales are signed: its int8 table carries a negated half.
  const fused::Int8Codebook* cb = fused::int8_codebook_for(vb, s.format.scheme.v_absmax);
  if (cb) f.row.v_i8 = cb->q, f.row.v_i8_step = cb->step;
  f.row.v_signed_scales = s.format.scheme.v_absmax;
  f.rotated = true;
  f.v_bits = vb;
  return f;
}

// Key range [lo, hi) visible to query i.
void key_range(const Ctx& c, int64_t i, int64_t* lo, int64_t* hi) {
  const int64_t pos = c.a->q_pos0 + i;
  *hi = std::min(pos, c.n_total - 1) + 1;
  *lo = c.a->window > 0 ? std::max<int64_t>(0, pos - c.a->window + 1) : 0;
}

// out rows of (i, kh) = (acc_p + unrotate(acc_r)) / l.
void finalize(const Ctx& c, int64_t i, int kh, State& st) {
  const int G = c.group, d = c.head_dim;
  const float* sign = c.has_rot ? quant::turbo_signs(d) : nullptr;
  for (int g = 0; g < G; ++g) {
    float* o = c.a->out + (i * c.a->n_heads + kh * G + g) * d;
    const float inv = st.l[g] > 0 ? 1.0f / st.l[g] : 0.0f;
    float* r = st.acc_r + g * d;
    if (c.has_rot)
      quant::fwht_inverse(r, d, sign, quant::turbo_inv_sqrt(d));  // deferred un-rotation
    for (int e = 0; e < d; ++e) o[e] = (st.acc_p[g * d + e] + (c.has_rot ? r[e] : 0.0f)) * inv;
  }
}

void reset(State& st, int G, int d) {
  for (int g = 0; g < G; ++g) st.m[g] = -INFINITY, st.l[g] = 0.0f;
  std::fill(st.acc_p, st.acc_p + 2 * G * d, 0.0f);
}

// Partials of one split: [G] m, [G] l, [G, d] acc_p, [G, d] acc_r.
size_t partial_floats(int G, int d) {
  return static_cast<size_t>(2 * G + 2 * G * d);
}

void store_partial(const State& st, int G, int d, float* out) {
  std::copy(st.m, st.m + G, out);
  std::copy(st.l, st.l + G, out + G);
  std::copy(st.acc_p, st.acc_p + 2 * G * d, out + 2 * G);
}

// Log-sum-exp merge of n_split partials into st.
void merge_partials(const float* parts, int n_split, int G, int d, State& st) {
  const size_t pf = partial_floats(G, d);
  for (int g = 0; g < G; ++g) {
    float mx = -INFINITY;
    for (int sp = 0; sp < n_split; ++sp) mx = std::max(mx, parts[sp * pf + g]);
    st.m[g] = mx;
    st.l[g] = 0.0f;
    float* ap = st.acc_p + g * d;
    float* ar = st.acc_r + g * d;
    std::fill(ap, ap + d, 0.0f);
    std::fill(ar, ar + d, 0.0f);
    for (int sp = 0; sp < n_split; ++sp) {
      const float* p = parts + sp * pf;
      if (p[g] == -INFINITY) continue;
      const float f = std::exp(p[g] - mx);
      st.l[g] += f * p[G + g];
      const float* pp = p + 2 * G + g * d;
      const float* pr = p + 2 * G + G * d + g * d;
      for (int e = 0; e < d; ++e) ap[e] += f * pp[e], ar[e] += f * pr[e];
    }
  }
}

struct Scratch {
  std::vector<float> acc;  // [2, G, d]
  State state(int G, int d) {
    if (acc.size() < static_cast<size_t>(2 * G * d)) acc.resize(static_cast<size_t>(2 * G * d));
    State st;
    st.acc_p = acc.data();
    st.acc_r = acc.data() + G * d;
    return st;
  }
};
thread_local Scratch t_scratch;

}  // namespace

bool fused_has_avx512() {
  static const bool yes =
      __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512vbmi") && __builtin_cpu_supports("avx512vnni");
  return yes;
}

bool fused_int8_query(const KvSegmentView& seg) {
  return fused::int8_keys(seg_format(seg).k);
}

bool fused_int8_values(const KvSegmentView& seg) {
  const SegFmt f = seg_format(seg);
  return f.rotated && f.row.v_i8 && fused::value_i8_supported(f.v_bits, f.row.head_dim);
}

void fused_int8_query_rows(const float* q, int64_t n_rows, int head_dim, float* out) {
  for (int64_t r = 0; r < n_rows; ++r) {
    const float* qr = q + r * head_dim;
    const fused::QScale sc = fused::query_scale(qr, head_dim);
    for (int e = 0; e < head_dim; ++e)
      out[r * head_dim + e] = sc.qs * static_cast<float>(fused::quantize_query_elem(qr[e], sc));
  }
}

// kAuto's choice: AVX-512 with the int8 V dot when the CPU has AVX-512, capped by
// TKV_FUSED_ISA=avx2|avx512 (fp32 V; benchmarks compare them); AVX2 where
// head_dim % 16 != 0.
FusedIsa fused_auto_isa(int head_dim) {
  if (head_dim % 16 != 0) return FusedIsa::kAvx2;
  static const FusedIsa isa = [] {
    const char* e = std::getenv("TKV_FUSED_ISA");
    const std::string cap = e ? e : "";
    if (cap == "avx2" || !fused_has_avx512()) return FusedIsa::kAvx2;
    if (cap == "avx512") return FusedIsa::kAvx512;
    return FusedIsa::kAvx512Int8V;
  }();
  return isa;
}

namespace {

using RunRange = void (*)(const Ctx&, int64_t, int, int64_t, int64_t, State&);

// One call of a batch: its formats and context, how its keys split, and where its
// tasks (query, kv head[, split]) and its partials sit in the batch's.
struct Plan {
  SegFmt fmts[8];
  Ctx c{};
  RunRange run_range = nullptr;
  int64_t n_base = 0;  // (query, kv head) tasks
  int n_split = 1;
  int64_t work = 0;   // key elements scored
  int64_t task0 = 0;  // first phase-one task in the batch
  size_t part0 = 0;   // first partial float (split calls)
  int64_t n_tasks() const { return n_base * n_split; }
};

// The split depends on the call and the pool alone (never on the rest of the batch),
// so a call computes the same floats in a batch as alone.
void make_plan(const FusedCall& fc, int n_threads, FusedIsa isa, Plan& p) {
  const KvSegmentView* segs = fc.segs;
  const AttnArgs& a = fc.a;
  TKV_CHECK(fc.n_segs >= 1 && fc.n_segs <= 8);
  const int d = segs[0].format.head_dim(), nkv = segs[0].format.n_kv_heads;
  const int G = a.n_heads / nkv;
  TKV_CHECK(G >= 1 && G <= kMaxGroup && G * nkv == a.n_heads && d % 8 == 0 && d <= kMaxDim);
  if (isa == FusedIsa::kAuto) isa = fused_auto_isa(d);
  TKV_CHECK(isa == FusedIsa::kAvx2 || (fused_has_avx512() && d % 16 == 0));
  p.run_range = isa == FusedIsa::kAvx2 ? &fused::avx2::run_range : &fused::avx512::run_range;
  p.c = Ctx{segs, p.fmts, fc.n_segs, &fc.a, G, d, nkv, 0, false};
  Ctx& c = p.c;
  for (int s = 0; s < fc.n_segs; ++s) {
    TKV_CHECK(segs[s].format.head_dim() == d && segs[s].format.n_kv_heads == nkv &&
              segs[s].pos0 == c.n_total);
    p.fmts[s] = seg_format(segs[s]);
    p.fmts[s].v_i8 = isa == FusedIsa::kAvx512Int8V && p.fmts[s].rotated && p.fmts[s].row.v_i8 &&
                     fused::value_i8_supported(p.fmts[s].v_bits, d);
    c.has_rot = c.has_rot || p.fmts[s].rotated;
    c.n_total += segs[s].n_kv;
  }
  p.n_base = a.n_q * nkv;
  int64_t lo_last = 0, hi_last = 0;
  key_range(c, a.n_q - 1, &lo_last, &hi_last);
  // Split the keys (flash-decoding) only when tasks are too few to fill the pool;
  // each split keeps >= 256 keys so the merge stays cheap.
  p.n_split = 1;
  if (p.n_base < 2 * n_threads) {
    const int64_t want = (2 * n_threads + p.n_base - 1) / p.n_base;
    p.n_split =
        static_cast<int>(std::clamp<int64_t>(std::min(want, (hi_last - lo_last) / 256), 1, 64));
  }
  p.work = a.n_q * nkv * (hi_last - lo_last) * d;
  // A call small enough to run on one thread (below) is not split either.
  if (p.work < kMinParallelElems) p.n_split = 1;
}

// Phase-one task t of p: a whole (query, kv head) row into the output, or one split's
// partial into parts.
void run_task(const Plan& p, int64_t t, float* parts) {
  const Ctx& c = p.c;
  const int G = c.group, d = c.head_dim;
  const int64_t base = t / p.n_split;
  const int sp = static_cast<int>(t % p.n_split);
  const int64_t i = base / c.n_kv_heads;
  const int kh = static_cast<int>(base % c.n_kv_heads);
  State st = t_scratch.state(G, d);
  reset(st, G, d);
  int64_t lo, hi;
  key_range(c, i, &lo, &hi);
  if (p.n_split == 1) {
    p.run_range(c, i, kh, lo, hi, st);
    finalize(c, i, kh, st);
    return;
  }
  const int64_t chunk = ((hi - lo + p.n_split - 1) / p.n_split + kBlock - 1) / kBlock * kBlock;
  const int64_t j0 = lo + sp * chunk, j1 = std::min(hi, j0 + chunk);
  if (j0 < j1) p.run_range(c, i, kh, j0, j1, st);
  store_partial(st, G, d, parts + p.part0 + static_cast<size_t>(t) * partial_floats(G, d));
}

// Phase two of a split call: merge (query, kv head) row `base` and write it out.
void merge_task(const Plan& p, int64_t base, const float* parts) {
  const int G = p.c.group, d = p.c.head_dim;
  const size_t pf = partial_floats(G, d);
  State st = t_scratch.state(G, d);
  merge_partials(parts + p.part0 + static_cast<size_t>(base * p.n_split) * pf, p.n_split, G, d, st);
  finalize(p.c, base / p.c.n_kv_heads, static_cast<int>(base % p.c.n_kv_heads), st);
}

// Index of the plan holding batch task t (plans in task order).
size_t plan_of(const std::vector<Plan>& plans, int64_t t) {
  size_t lo = 0, hi = plans.size();
  while (hi - lo > 1) {
    const size_t mid = (lo + hi) / 2;
    (plans[mid].task0 <= t ? lo : hi) = mid;
  }
  return lo;
}

}  // namespace

void attention_paged_fused_cpu(const KvSegmentView* segs, int n_segs, const AttnArgs& a,
                               ThreadPool& pool, FusedIsa isa) {
  const FusedCall fc{segs, n_segs, a};
  attention_paged_fused_cpu_batch(&fc, 1, pool, isa);
}

void attention_paged_fused_cpu_batch(const FusedCall* calls, int n_calls, ThreadPool& pool,
                                     FusedIsa isa) {
  if (n_calls <= 0) return;
  std::vector<Plan> plans(static_cast<size_t>(n_calls));  // never resized: Ctx points into it
  int64_t n_tasks = 0, work = 0;
  size_t n_parts = 0;
  std::vector<int64_t> merge0;  // first phase-two task of each split plan
  int64_t n_merges = 0;
  for (int k = 0; k < n_calls; ++k) {
    Plan& p = plans[static_cast<size_t>(k)];
    make_plan(calls[k], pool.n_threads(), isa, p);
    p.task0 = n_tasks;
    n_tasks += p.n_tasks();
    work += p.work;
    if (p.n_split > 1) {
      p.part0 = n_parts;
      n_parts += static_cast<size_t>(p.n_tasks()) * partial_floats(p.c.group, p.c.head_dim);
    }
  }
  std::vector<float> parts(n_parts);
  std::vector<size_t> split_plans;
  for (size_t k = 0; k < plans.size(); ++k) {
    if (plans[k].n_split == 1) continue;
    split_plans.push_back(k);
    merge0.push_back(n_merges);
    n_merges += plans[k].n_base;
  }
  const auto phase1 = [&](int, int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      const Plan& p = plans[plan_of(plans, t)];
      run_task(p, t - p.task0, parts.data());
    }
  };
  const auto phase2 = [&](int, int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      const size_t m = static_cast<size_t>(std::upper_bound(merge0.begin(), merge0.end(), t) -
                                           merge0.begin() - 1);
      merge_task(plans[split_plans[m]], t - merge0[m], parts.data());
    }
  };
  // Small batches run on the caller's thread: waking workers costs more than the
  // work itself (~40 µs of keys x dims on one core).
  if (work < kMinParallelElems) {
    phase1(0, 0, n_tasks);
    phase2(0, 0, n_merges);
    return;
  }
  // One call: even ranges (its tasks are alike). Several (sequences of different
  // lengths, decode rows beside prefill chunks): tasks handed out one at a time.
  if (n_calls == 1)
    pool.parallel_for(n_tasks, phase1);
  else
    pool.parallel_for_dynamic(n_tasks, 1, phase1);
  if (n_merges > 0) pool.parallel_for(n_merges, phase2);
}

}  // namespace tkv::kernels
