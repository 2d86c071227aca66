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

void attention_paged_fused_cpu(const KvSegmentView* segs, int n_segs, const AttnArgs& a,
                               ThreadPool& pool, FusedIsa isa) {
  TKV_CHECK(n_segs >= 1 && n_segs <= 8);
  const int d = segs[0].format.head_dim(), nkv = segs[0].format.n_kv_heads;
  const int G = a.n_heads / nkv;
  TKV_CHECK(G >= 1 && G <= kMaxGroup && G * nkv == a.n_heads && d % 8 == 0 && d <= kMaxDim);
  if (isa == FusedIsa::kAuto) isa = fused_auto_isa(d);
  TKV_CHECK(isa == FusedIsa::kAvx2 || (fused_has_avx512() && d % 16 == 0));
  const auto run_range =
      isa == FusedIsa::kAvx2 ? &fused::avx2::run_range : &fused::avx512::run_range;
  SegFmt fmts[8];
  Ctx c{segs, fmts, n_segs, &a, G, d, nkv, 0, false};
  for (int s = 0; s < n_segs; ++s) {
    TKV_CHECK(segs[s].format.head_dim() == d && segs[s].format.n_kv_heads == nkv &&
              segs[s].pos0 == c.n_total);
    fmts[s] = seg_format(segs[s]);
    fmts[s].v_i8 = isa == FusedIsa::kAvx512Int8V && fmts[s].rotated && fmts[s].row.v_i8 &&
                   fused::value_i8_supported(fmts[s].v_bits, d);
    c.has_rot = c.has_rot || fmts[s].rotated;
    c.n_total += segs[s].n_kv;
  }
  const int64_t n_base = a.n_q * nkv;
  const int n_threads = pool.n_threads();
  int64_t lo_last = 0, hi_last = 0;
  key_range(c, a.n_q - 1, &lo_last, &hi_last);
  // Split the keys (flash-decoding) only when tasks are too few to fill the pool;
  // each split keeps >= 256 keys so the merge stays cheap.
  int n_split = 1;
  if (n_base < 2 * n_threads) {
    const int64_t want = (2 * n_threads + n_base - 1) / n_base;
    n_split =
        static_cast<int>(std::clamp<int64_t>(std::min(want, (hi_last - lo_last) / 256), 1, 64));
  }
  // Small calls run on the caller's thread: waking workers costs more than the
  // work itself (~40 µs of keys x dims on one core).
  const int64_t work = a.n_q * nkv * (hi_last - lo_last) * d;
  const bool inline_run = work < kMinParallelElems;
  if (inline_run) n_split = 1;
  if (n_split == 1) {
    const auto body = [&](int, int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) {
        const int64_t i = t / nkv;
        const int kh = static_cast<int>(t % nkv);
        State st = t_scratch.state(G, d);
        reset(st, G, d);
        int64_t lo, hi;
        key_range(c, i, &lo, &hi);
        run_range(c, i, kh, lo, hi, st);
        finalize(c, i, kh, st);
      }
    };
    if (inline_run) {
      body(0, 0, n_base);
    } else {
      pool.parallel_for(n_base, body);
    }
    return;
  }
  const size_t pf = partial_floats(G, d);
  std::vector<float> parts(static_cast<size_t>(n_base * n_split) * pf);
  pool.parallel_for(n_base * n_split, [&](int, int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      const int64_t base = t / n_split;
      const int sp = static_cast<int>(t % n_split);
      const int64_t i = base / nkv;
      const int kh = static_cast<int>(base % nkv);
      State st = t_scratch.state(G, d);
      reset(st, G, d);
      int64_t lo, hi;
      key_range(c, i, &lo, &hi);
      const int64_t chunk = ((hi - lo + n_split - 1) / n_split + kBlock - 1) / kBlock * kBlock;
      const int64_t j0 = lo + sp * chunk, j1 = std::min(hi, j0 + chunk);
      if (j0 < j1) run_range(c, i, kh, j0, j1, st);
      store_partial(st, G, d, parts.data() + static_cast<size_t>(t) * pf);
    }
  });
  pool.parallel_for(n_base, [&](int, int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      State st = t_scratch.state(G, d);
      merge_partials(parts.data() + static_cast<size_t>(t * n_split) * pf, n_split, G, d, st);
      finalize(c, t / nkv, static_cast<int>(t % nkv), st);
    }
  });
}

}  // namespace tkv::kernels
