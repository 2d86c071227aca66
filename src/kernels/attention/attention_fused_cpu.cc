// Fused attention over paged bf16 / affine / TurboQuant segments on the CPU
// (spec turboquant-codec.md §4, flash-decoding split-KV): per (query token, kv
// head[, KV split]) task, K rows are dequantized 8 lanes at a time in registers
// and dotted with the GQA group's queries, softmax is online (exp domain), turbo
// V is accumulated in the rotated domain and un-rotated once per output row.
#include <algorithm>
#include <cmath>
#include <vector>

#include "base/check.h"
#include "kernels/attention/attention_fused_avx2.h"
#include "kernels/attention/attention_quant.h"
#include "quant/fwht.h"
#include "quant/turbo_tables.h"

namespace tkv::kernels {
namespace {

using fused::RowFmt;
constexpr int kBlock = 32;     // keys per online-softmax step
constexpr int kMaxGroup = 16;  // query heads per kv head
constexpr int kTile = 8;       // query heads kept in registers at once
constexpr int kMaxDim = 512;
constexpr int64_t kMinParallelElems = int64_t{1} << 19;  // key elements below which one thread runs it all

enum class KId { kBf16, kT2, kT3, kT4, kT5, kT8s, kT8u, kA4, kA8 };
enum class VId { kBf16, kT1, kT2, kT3, kT4, kT5, kT8, kA4, kA8 };

struct SegFmt {
  RowFmt row;
  int64_t row_bytes = 0;
  KId k = KId::kBf16;
  VId v = VId::kBf16;
  bool rotated = false;
};

// Running softmax state of one task: heads [G], accumulators [G, head_dim].
struct State {
  float m[kMaxGroup], l[kMaxGroup];
  float* acc_p;  // [G, d] original-domain V (bf16 / affine segments)
  float* acc_r;  // [G, d] rotated-domain V (turbo segments)
};

// Scores of nb consecutive rows for NT query heads: s[g][t] = scale * q_g . k̂_t.
template <class KD, int NT>
void score_block(const uint8_t* base, int64_t rb, int nb, const RowFmt& f, const float* const* q, float scale,
                 float (*s)[kBlock]) {
  const int d = f.head_dim;
  for (int t = 0; t < nb; ++t) {
    const uint8_t* row = base + t * rb;
    __m256 acc[NT];
    for (int g = 0; g < NT; ++g) acc[g] = _mm256_setzero_ps();
    for (int grp = 0; grp < d / KD::kGroup; ++grp) {
      const typename KD::P p = KD::params(row, grp, f);
      for (int c = 0; c < KD::kGroup; c += 8) {
        const int e = grp * KD::kGroup + c;
        const __m256 k = KD::chunk(row, e, p, f);
        for (int g = 0; g < NT; ++g) acc[g] = _mm256_fmadd_ps(_mm256_loadu_ps(q[g] + e), k, acc[g]);
      }
    }
    for (int g = 0; g < NT; ++g) s[g][t] = fused::hsum(acc[g]) * scale;
  }
}

// acc[g][e] += sum_t p[g][t] * v̂_t[e] for NT heads (v̂ in VD's domain).
template <class VD, int NT>
void value_block(const uint8_t* base, int64_t rb, int nb, const RowFmt& f, const float (*p)[kBlock], float* const* acc) {
  const int d = f.head_dim;
  constexpr int kMaxGroups = kMaxDim / VD::kGroup;
  alignas(32) float w[kMaxGroups][kBlock][NT];
  alignas(32) float bw[VD::kHasBias ? kMaxGroups : 1][kBlock][NT];
  for (int t = 0; t < nb; ++t) {
    const uint8_t* row = base + t * rb;
    for (int grp = 0; grp < d / VD::kGroup; ++grp) {
      const float sc = VD::scale(row, grp, f), bi = VD::bias(row, grp, f);
      for (int g = 0; g < NT; ++g) {
        w[grp][t][g] = p[g][t] * sc;
        if constexpr (VD::kHasBias) bw[grp][t][g] = p[g][t] * bi;
      }
    }
  }
  for (int e = 0; e < d; e += 8) {
    const int grp = e / VD::kGroup;
    __m256 a[NT];
    for (int g = 0; g < NT; ++g) a[g] = _mm256_loadu_ps(acc[g] + e);
    for (int t = 0; t < nb; ++t) {
      const __m256 v = VD::value(base + t * rb, e, f);
      for (int g = 0; g < NT; ++g) {
        a[g] = _mm256_fmadd_ps(_mm256_broadcast_ss(&w[grp][t][g]), v, a[g]);
        if constexpr (VD::kHasBias) a[g] = _mm256_add_ps(a[g], _mm256_broadcast_ss(&bw[grp][t][g]));
      }
    }
    for (int g = 0; g < NT; ++g) _mm256_storeu_ps(acc[g] + e, a[g]);
  }
}

template <class KD>
void score_nt(int nt, const uint8_t* base, int64_t rb, int nb, const RowFmt& f, const float* const* q, float scale,
              float (*s)[kBlock]) {
  switch (nt) {
#define TKV_NT(N) \
  case N: return score_block<KD, N>(base, rb, nb, f, q, scale, s);
    TKV_NT(1) TKV_NT(2) TKV_NT(3) TKV_NT(4) TKV_NT(5) TKV_NT(6) TKV_NT(7) TKV_NT(8)
#undef TKV_NT
    default: TKV_CHECK(false);
  }
}

template <class VD>
void value_nt(int nt, const uint8_t* base, int64_t rb, int nb, const RowFmt& f, const float (*p)[kBlock],
              float* const* acc) {
  switch (nt) {
#define TKV_NT(N) \
  case N: return value_block<VD, N>(base, rb, nb, f, p, acc);
    TKV_NT(1) TKV_NT(2) TKV_NT(3) TKV_NT(4) TKV_NT(5) TKV_NT(6) TKV_NT(7) TKV_NT(8)
#undef TKV_NT
    default: TKV_CHECK(false);
  }
}

void score_any(const SegFmt& sf, int nt, const uint8_t* base, int nb, const float* const* q, float scale,
               float (*s)[kBlock]) {
  using namespace fused;
  const RowFmt& f = sf.row;
  const int64_t rb = sf.row_bytes;
  switch (sf.k) {
    case KId::kBf16: return score_nt<KBf16>(nt, base, rb, nb, f, q, scale, s);
    case KId::kT2: return score_nt<KTurbo<2, false>>(nt, base, rb, nb, f, q, scale, s);
    case KId::kT3: return score_nt<KTurbo<3, false>>(nt, base, rb, nb, f, q, scale, s);
    case KId::kT4: return score_nt<KTurbo<4, false>>(nt, base, rb, nb, f, q, scale, s);
    case KId::kT5: return score_nt<KTurbo<5, false>>(nt, base, rb, nb, f, q, scale, s);
    case KId::kT8s: return score_nt<KTurbo<8, true>>(nt, base, rb, nb, f, q, scale, s);
    case KId::kT8u: return score_nt<KTurbo<8, false>>(nt, base, rb, nb, f, q, scale, s);
    case KId::kA4: return score_nt<KAffine<4>>(nt, base, rb, nb, f, q, scale, s);
    case KId::kA8: return score_nt<KAffine<8>>(nt, base, rb, nb, f, q, scale, s);
  }
}

void value_any(const SegFmt& sf, int nt, const uint8_t* base, int nb, const float (*p)[kBlock], float* const* acc) {
  using namespace fused;
  const RowFmt& f = sf.row;
  const int64_t rb = sf.row_bytes;
  switch (sf.v) {
    case VId::kBf16: return value_nt<VBf16>(nt, base, rb, nb, f, p, acc);
    case VId::kT1: return value_nt<VTurbo<1>>(nt, base, rb, nb, f, p, acc);
    case VId::kT2: return value_nt<VTurbo<2>>(nt, base, rb, nb, f, p, acc);
    case VId::kT3: return value_nt<VTurbo<3>>(nt, base, rb, nb, f, p, acc);
    case VId::kT4: return value_nt<VTurbo<4>>(nt, base, rb, nb, f, p, acc);
    case VId::kT5: return value_nt<VTurbo<5>>(nt, base, rb, nb, f, p, acc);
    case VId::kT8: return value_nt<VTurbo<8>>(nt, base, rb, nb, f, p, acc);
    case VId::kA4: return value_nt<VAffine<4>>(nt, base, rb, nb, f, p, acc);
    case VId::kA8: return value_nt<VAffine<8>>(nt, base, rb, nb, f, p, acc);
  }
}

// Centroids padded to 256 entries so the 8-lane table lookups never read past them.
struct PaddedCentroids {
  alignas(32) float c[256] = {};
};
const float* padded_centroids(int v_bits) {
  static const auto tables = [] {
    std::vector<PaddedCentroids> t(9);
    for (int b : {1, 2, 3, 4, 5, 8})
      if (const float* c = quant::turbo_centroids(b))
        for (int i = 0; i < (1 << b); ++i) t[static_cast<size_t>(b)].c[i] = c[i];
    return t;
  }();
  return tables[static_cast<size_t>(v_bits)].c;
}

SegFmt seg_format(const KvSegmentView& s) {
  SegFmt f;
  f.row.head_dim = s.head_dim;
  f.row_bytes = kv_segment_row_bytes(s.is_bf16, s.scheme, s.head_dim);
  if (s.is_bf16) {
    f.row.v_off = 2 * s.head_dim;
    return f;
  }
  const quant::KvRowLayout l = quant::kv_row_layout(s.scheme);
  f.row = {l.k_data_offset, l.v_data_offset, l.k_scale_offset, l.k_zero_offset, l.v_scale_offset, l.v_zero_offset,
           s.head_dim, nullptr};
  const int kb = s.scheme.k_bits, vb = s.scheme.v_bits;
  if (s.scheme.kind == quant::KvKind::kAffine) {
    f.k = kb == 8 ? KId::kA8 : KId::kA4;
    f.v = vb == 8 ? VId::kA8 : VId::kA4;
    return f;
  }
  TKV_CHECK(s.scheme.kind == quant::KvKind::kTurbo);
  f.k = kb == 2 ? KId::kT2 : kb == 3 ? KId::kT3 : kb == 4 ? KId::kT4 : kb == 5 ? KId::kT5
        : s.scheme.k_signed() ? KId::kT8s : KId::kT8u;
  f.v = vb == 1 ? VId::kT1 : vb == 2 ? VId::kT2 : vb == 3 ? VId::kT3 : vb == 4 ? VId::kT4 : vb == 5 ? VId::kT5 : VId::kT8;
  f.row.centroids = padded_centroids(vb);
  f.rotated = true;
  return f;
}

struct Ctx {
  const KvSegmentView* segs;
  const SegFmt* fmts;
  int n_segs;
  const AttnArgs* a;
  int group, head_dim, n_kv_heads;
  int64_t n_total;
  bool has_rot;
};

// Online-softmax step for nb keys already scored into s (overwritten with p).
void softmax_step(State& st, int g0, int nt, int nb, float (*s)[kBlock], int d, bool has_rot) {
  for (int g = 0; g < nt; ++g) {
    const int gg = g0 + g;
    float mb = st.m[gg];
    for (int t = 0; t < nb; ++t) mb = std::max(mb, s[g][t]);
    if (mb > st.m[gg]) {
      const float corr = std::exp(st.m[gg] - mb);  // exp(-inf) = 0 on the first block
      st.l[gg] *= corr;
      for (float* acc : {st.acc_p, has_rot ? st.acc_r : nullptr}) {
        if (!acc) continue;
        const __m256 c = _mm256_set1_ps(corr);
        for (int e = 0; e < d; e += 8)
          _mm256_storeu_ps(acc + gg * d + e, _mm256_mul_ps(c, _mm256_loadu_ps(acc + gg * d + e)));
      }
      st.m[gg] = mb;
    }
    const __m256 m = _mm256_set1_ps(mb);
    __m256 lsum = _mm256_setzero_ps();
    for (int t = nb; t % 8 != 0; ++t) s[g][t] = -INFINITY;  // pad lanes: exp -> 0
    for (int t = 0; t < nb; t += 8) {
      const __m256 p = fused::exp_neg(_mm256_sub_ps(_mm256_load_ps(&s[g][t]), m));
      _mm256_store_ps(&s[g][t], p);
      lsum = _mm256_add_ps(lsum, p);
    }
    st.l[gg] += fused::hsum(lsum);
  }
}

// Attends query i / kv head kh over keys [j0, j1) of every segment.
void run_range(const Ctx& c, int64_t i, int kh, int64_t j0, int64_t j1, State& st) {
  const int G = c.group, d = c.head_dim;
  const float* q[kMaxGroup];
  for (int g = 0; g < G; ++g) q[g] = c.a->q + ((i * c.a->n_heads) + kh * G + g) * d;
  alignas(32) float s[kTile][kBlock];
  for (int si = 0; si < c.n_segs; ++si) {
    const KvSegmentView& seg = c.segs[si];
    const SegFmt& sf = c.fmts[si];
    const int64_t lo = std::max(j0, seg.pos0), hi = std::min(j1, seg.pos0 + seg.n_kv);
    for (int64_t j = lo; j < hi;) {
      const int64_t local = j - seg.pos0;
      const int in_page = static_cast<int>(local % seg.page_size);
      const int nb = static_cast<int>(std::min<int64_t>({kBlock, seg.page_size - in_page, hi - j}));
      const int32_t page = seg.page_ids[local / seg.page_size];
      TKV_CHECK(page >= 0);
      const uint8_t* base = seg.pool + ((int64_t{page} * seg.n_kv_heads + kh) * seg.page_size + in_page) * sf.row_bytes;
      float* acc_base = sf.rotated ? st.acc_r : st.acc_p;
      for (int g0 = 0; g0 < G; g0 += kTile) {
        const int nt = std::min(kTile, G - g0);
        score_any(sf, nt, base, nb, q + g0, c.a->scale, s);
        softmax_step(st, g0, nt, nb, s, d, c.has_rot);
        float* acc[kTile];
        for (int g = 0; g < nt; ++g) acc[g] = acc_base + (g0 + g) * d;
        value_any(sf, nt, base, nb, s, acc);
      }
      j += nb;
    }
  }
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
    if (c.has_rot) quant::fwht_inverse(r, d, sign, quant::turbo_inv_sqrt(d));  // deferred un-rotation
    for (int e = 0; e < d; ++e) o[e] = (st.acc_p[g * d + e] + (c.has_rot ? r[e] : 0.0f)) * inv;
  }
}

void reset(State& st, int G, int d) {
  for (int g = 0; g < G; ++g) st.m[g] = -INFINITY, st.l[g] = 0.0f;
  std::fill(st.acc_p, st.acc_p + 2 * G * d, 0.0f);
}

// Partials of one split: [G] m, [G] l, [G, d] acc_p, [G, d] acc_r.
size_t partial_floats(int G, int d) { return static_cast<size_t>(2 * G + 2 * G * d); }

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

void attention_paged_fused_cpu(const KvSegmentView* segs, int n_segs, const AttnArgs& a, ThreadPool& pool) {
  TKV_CHECK(n_segs >= 1 && n_segs <= 8);
  const int d = segs[0].head_dim, nkv = segs[0].n_kv_heads;
  const int G = a.n_heads / nkv;
  TKV_CHECK(G >= 1 && G <= kMaxGroup && G * nkv == a.n_heads && d % 8 == 0 && d <= kMaxDim);
  SegFmt fmts[8];
  Ctx c{segs, fmts, n_segs, &a, G, d, nkv, 0, false};
  for (int s = 0; s < n_segs; ++s) {
    TKV_CHECK(segs[s].head_dim == d && segs[s].n_kv_heads == nkv && segs[s].pos0 == c.n_total);
    fmts[s] = seg_format(segs[s]);
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
    n_split = static_cast<int>(std::clamp<int64_t>(std::min(want, (hi_last - lo_last) / 256), 1, 64));
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
