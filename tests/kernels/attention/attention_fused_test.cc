// Fused paged attention == reference attention on the dequantized cache
// (kvcodec_dequant_ref + attention_f32_ref), for every scheme, head_dim
// 64/128/256, GQA 1/3/4/8, contexts 1, page-1, page, page+1 and 4097 (split-KV path),
// a bf16 prefix segment (--kv-quant-start), sliding windows with released pages,
// and deferred == eager un-rotation of turbo V. Tolerances: attention_fused_bound.h.
#include "attention_fused_test.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "kernels/attention/attention_fused_bound.h"
#include "quant/turbo_tables.h"
#include "quant/turbo_v.h"
#include "tests/sanitized.h"

namespace tkv::kernels::testing {
namespace {

struct Scheme {
  bool is_float;
  quant::KvScheme s;
  std::string name;
};

std::vector<Scheme> all_schemes(int d) {
  std::vector<Scheme> out{{true, {}, "bf16"}};
  for (int b : {8, 4})
    out.push_back({false, {quant::KvKind::kAffine, b, b, d}, "affine" + std::to_string(b)});
  for (int kb : {2, 4, 5, 8})
    for (int vb : {2, 3, 4, 5, 8})
      out.push_back({false,
                     {quant::KvKind::kTurbo, kb, vb, d},
                     "turbo:k" + std::to_string(kb) + "v" + std::to_string(vb)});
  for (int kb : {4, 5, 8}) {  // symmetric keys: the implied zero, no zero plane
    quant::KvScheme s{quant::KvKind::kTurbo, kb, 4, d};
    s.k_symmetric = true;
    out.push_back({false, s, "turbo:k" + std::to_string(kb) + "sv4"});
  }
  for (int vb : {3, 4}) {  // the absmax value codebook: signed V scales, the fp32 V path
    quant::KvScheme s{quant::KvKind::kTurbo, 8, vb, d};
    s.k_symmetric = s.v_absmax = true;
    out.push_back({false, s, "turbo:k8sv" + std::to_string(vb) + "a"});
  }
  // 3-bit keys: in the codec, not offered by --kv-quant; the kernel still covers them.
  out.push_back({false, {quant::KvKind::kTurbo, 3, 3, d}, "turbo:k3v3"});
  out.push_back({true, {quant::KvKind::kF16, 16, 16, d}, "f16"});
  return out;
}

struct Case {
  int d, nkv, group;
  int64_t n_ctx, n_q, window, quant_start;
  int page_size;
};

// Builds the segments, runs fused and reference, checks the derived bound.
void run_case(const Scheme& sc, const Case& c, ThreadPool& pool) {
  const int n_heads = c.nkv * c.group;
  std::mt19937 rng(static_cast<uint32_t>(c.d * 7919 + c.group * 31 + c.n_ctx * 3 + c.quant_start));
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> k(static_cast<size_t>(c.n_ctx * c.nkv * c.d)), v(k.size());
  for (size_t i = 0; i < k.size(); ++i)
    k[i] = nd(rng) + 0.5f * static_cast<float>(i % 7), v[i] = nd(rng);
  std::vector<SegStore> segs;
  const int64_t qs = sc.is_float ? 0 : std::min(c.quant_start, c.n_ctx);
  if (qs > 0) {
    segs.emplace_back();
    build_segment(segs.back(), true, {}, c.d, c.nkv, c.page_size, 0, qs, k.data(), v.data(), 11);
  }
  if (c.n_ctx > qs) {
    segs.emplace_back();
    build_segment(segs.back(), sc.is_float, sc.s, c.d, c.nkv, c.page_size, qs, c.n_ctx - qs,
                  k.data(), v.data(), 12);
  }
  // Release pages no query of this pass can see (rotating window).
  const int64_t q_pos0 = c.n_ctx - c.n_q;
  if (c.window > 0)
    for (auto& s : segs)
      for (int64_t p = 0; (p + 1) * c.page_size + s.view.pos0 <= q_pos0 - c.window + 1; ++p)
        s.page_ids[static_cast<size_t>(p)] = -1;
  std::vector<KvSegmentView> views;
  for (auto& s : segs) views.push_back(s.view);
  std::vector<float> q(static_cast<size_t>(c.n_q * n_heads * c.d));
  for (auto& x : q) x = nd(rng);
  std::vector<float> ref(q.size(), NAN);
  AttnArgs a{q.data(),
             ref.data(),
             c.n_q,
             n_heads,
             q_pos0,
             c.window,
             1.0f / std::sqrt(static_cast<float>(c.d))};
  attention_paged_ref(views.data(), static_cast<int>(views.size()), a);

  // Two checks. Against the fp32-query reference, the derived bound with the int8
  // query's worst case (attention_fused_bound.h). The sharp one: against the reference
  // fed the kernel's own query (RefQuery::kAsFused: its int8 query on quantized
  // segments, fp32 on a bf16 prefix), the fp32 bound alone, where an error in the
  // integer dots or the zero-point folding shows long before the worst case above.
  const FusedBoundInputs ti = fused_bound_inputs(views.data(), static_cast<int>(views.size()), a);
  std::vector<float> ref8(q.size(), NAN);
  AttnArgs a8 = a;
  a8.out = ref8.data();
  attention_paged_ref(views.data(), static_cast<int>(views.size()), a8, RefQuery::kAsFused);
  // Every inner loop this CPU can run (AVX2 always; AVX-512 with fp32 and int8 V where present).
  std::vector<FusedIsa> isas = {FusedIsa::kAvx2};
  if (fused_has_avx512()) isas.push_back(FusedIsa::kAvx512);
  if (fused_has_avx512()) isas.push_back(FusedIsa::kAvx512Int8V);
  for (FusedIsa isa : isas) {
    const char* isa_name = isa == FusedIsa::kAvx2     ? "avx2"
                           : isa == FusedIsa::kAvx512 ? "avx512"
                                                      : "avx512-i8v";
    const double tol = fused_bound(ti, c.d, c.n_ctx, RefQuery::kFp32, isa);
    const double tol8 = fused_bound(ti, c.d, c.n_ctx, RefQuery::kAsFused, isa);
    std::vector<float> out(q.size(), NAN);
    a.out = out.data();
    attention_paged_fused_cpu(views.data(), static_cast<int>(views.size()), a, pool, isa);
    const auto check = [&](const std::vector<float>& want, double bound, const char* what) {
      double max_err = 0;
      size_t at = 0;
      for (size_t i = 0; i < out.size(); ++i) {
        ASSERT_TRUE(std::isfinite(out[i]) && std::isfinite(want[i]))
            << sc.name << " " << isa_name << " non-finite at " << i;
        const double e = std::fabs(static_cast<double>(out[i]) - want[i]);
        if (e > max_err) max_err = e, at = i;
      }
      if (std::getenv("TKV_TEST_VERBOSE"))
        std::printf("%s %s %s d%d g%d ctx%lld err %.3g tol %.3g at %zu\n", what, sc.name.c_str(),
                    isa_name, c.d, c.group, (long long)c.n_ctx, max_err, bound, at);
      EXPECT_LE(max_err, bound) << what << " " << sc.name << " " << isa_name << " d " << c.d
                                << " kvh " << c.nkv << " group " << c.group << " ctx " << c.n_ctx
                                << " n_q " << c.n_q << " window " << c.window << " qstart "
                                << c.quant_start << " max err at " << at << " (fused " << out[at]
                                << " ref " << want[at] << ")";
    };
    check(ref, tol, "vs-ref");
    check(ref8, tol8, "vs-ref-as-fused");
  }
}

// The loops below: every scheme in the release build; under the sanitizers
// (whose job here is memory and UB, the numerics being covered by the release
// run) bf16 and every third quantized scheme.
std::vector<Scheme> loop_schemes(int d) {
  std::vector<Scheme> all = all_schemes(d);
  if (!tkv::testing::kSanitized) return all;
  std::vector<Scheme> out;
  for (size_t i = 0; i < all.size(); ++i)
    if (all[i].is_float || i % 3 == 0) out.push_back(all[i]);
  return out;
}

TEST(AttentionFused, MatchesReferenceShortContexts) {
  ThreadPool pool(2);
  for (int d : {64, 128, 256})
    for (const Scheme& sc : loop_schemes(d))
      for (int group : {1, 3, 4, 8})
        for (int64_t n_ctx : {1, 63, 64, 65})
          run_case(sc, {d, 2, group, n_ctx, std::min<int64_t>(n_ctx, 5), 0, 0, 64}, pool);
}

TEST(AttentionFused, MatchesReferenceLongContextSplitKv) {
  ThreadPool pool(2);  // one query x one kv head: the split-KV (flash-decoding) path
  for (const Scheme& sc : loop_schemes(128)) run_case(sc, {128, 1, 8, 4097, 1, 0, 0, 64}, pool);
  for (int d : {64, 256})
    for (const Scheme& sc : loop_schemes(d))
      if (sc.is_float || sc.s.kind == quant::KvKind::kAffine || sc.s.k_bits == 8 ||
          sc.s.v_bits == 3)
        for (int group : {1, 8}) run_case(sc, {d, 1, group, 4097, 1, 0, 0, 64}, pool);
  for (int d : {64, 128}) run_case(all_schemes(d)[9], {d, 1, 3, 4097, 3, 0, 0, 64}, pool);
}

TEST(AttentionFused, Bf16PrefixThenQuantized) {
  ThreadPool pool(2);
  for (int d : {64, 128})
    for (const Scheme& sc : loop_schemes(d))
      for (int64_t qs : {1, 15, 16, 17, 100}) run_case(sc, {d, 2, 4, 120, 7, 0, qs, 16}, pool);
  run_case(all_schemes(128)[9], {128, 1, 4, 4097, 1, 0, 1000, 64}, pool);
}

// The engine's shapes: a whole causal prompt in one pass (many queries per kv
// head), then single-token decode steps, 64-token pages, a bf16 prefix of 8.
TEST(AttentionFused, EnginePrefillThenDecodeShapes) {
  ThreadPool pool(2);
  for (int d : {64, 128})
    for (const Scheme& sc : loop_schemes(d))
      for (int64_t n_ctx : {33, 47, 70, 129}) {
        run_case(sc, {d, 3, 3, n_ctx, n_ctx, 0, 8, 64}, pool);
        run_case(sc, {d, 3, 3, n_ctx, 1, 0, 8, 64}, pool);
      }
}

TEST(AttentionFused, SlidingWindowWithReleasedPages) {
  ThreadPool pool(2);
  for (int d : {64, 256})
    for (const Scheme& sc : loop_schemes(d))
      for (int64_t window : {1, 5, 33, 512}) run_case(sc, {d, 1, 4, 700, 4, window, 0, 16}, pool);
}

// A batch of calls (one per sequence of a batched step: decode rows over contexts that
// do and do not split, a prefill chunk, a window) gives every call the floats it gets
// alone: the batch driver changes who runs a task, never how a call splits or merges.
TEST(AttentionFused, BatchEqualsEachCallAlone) {
  ThreadPool pool(2);
  struct Call {
    int64_t n_ctx, n_q, window;
  };
  const Call calls[] = {{1, 1, 0},    {65, 1, 0},   {600, 1, 0}, {4097, 1, 0},
                        {129, 63, 0}, {700, 1, 33}, {2000, 2, 0}};
  for (int d : {64, 128})
    for (const Scheme& sc : all_schemes(d)) {
      if (!(sc.is_float || sc.name == "affine8" || sc.name == "turbo:k8v3" ||
            sc.name == "turbo:k4v3" || sc.name == "turbo:k8sv4a" || sc.name == "turbo:k8v8"))
        continue;
      const int nkv = 2, group = 3, n_heads = nkv * group;
      std::mt19937 rng(static_cast<uint32_t>(d));
      std::normal_distribution<float> nd(0.f, 1.f);
      std::vector<SegStore> store(std::size(calls));
      std::vector<std::vector<float>> q(std::size(calls)), alone(std::size(calls)),
          batched(std::size(calls));
      std::vector<FusedCall> fc(std::size(calls));
      for (size_t i = 0; i < std::size(calls); ++i) {
        const Call& c = calls[i];
        std::vector<float> k(static_cast<size_t>(c.n_ctx * nkv * d)), v(k.size());
        for (size_t j = 0; j < k.size(); ++j) k[j] = nd(rng), v[j] = nd(rng);
        build_segment(store[i], sc.is_float, sc.s, d, nkv, 64, 0, c.n_ctx, k.data(), v.data(),
                      static_cast<uint32_t>(i));
        q[i].resize(static_cast<size_t>(c.n_q * n_heads * d));
        for (auto& x : q[i]) x = nd(rng);
        alone[i].assign(q[i].size(), NAN);
        batched[i].assign(q[i].size(), NAN);
        AttnArgs a{q[i].data(),
                   alone[i].data(),
                   c.n_q,
                   n_heads,
                   c.n_ctx - c.n_q,
                   c.window,
                   1.0f / std::sqrt(static_cast<float>(d))};
        attention_paged_fused_cpu(&store[i].view, 1, a, pool);
        a.out = batched[i].data();
        fc[i] = {&store[i].view, 1, a};
      }
      attention_paged_fused_cpu_batch(fc.data(), static_cast<int>(fc.size()), pool);
      for (size_t i = 0; i < std::size(calls); ++i)
        EXPECT_EQ(std::memcmp(alone[i].data(), batched[i].data(), alone[i].size() * sizeof(float)),
                  0)
            << sc.name << " d " << d << " call " << i << " (ctx " << calls[i].n_ctx << ", n_q "
            << calls[i].n_q << ")";
    }
}

// Attention is linear in V: un-rotating the p-weighted sum of rotated rows once
// equals the p-weighted sum of eagerly un-rotated rows. fp32 bound: both sides
// sum n terms (n u Σ p|v| each) and run log2(d) butterfly stages on values of
// magnitude <= sqrt(d) max|ṽ| ((log2 d + 1) u sqrt(d) max|ṽ| Σp).
TEST(AttentionFused, DeferredUnrotationEqualsEager) {
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::uniform_real_distribution<float> ud(0.f, 1.f);
  for (int d : {64, 128, 256, 512})
    for (int vb : {2, 3, 4, 5, 8}) {
      const int n = 300;
      const quant::KvScheme s{quant::KvKind::kTurbo, 8, vb, d};
      const quant::KvRowLayout lay = quant::kv_row_layout(s);
      std::vector<uint8_t> rows(static_cast<size_t>(n * lay.row_bytes));
      std::vector<float> x(static_cast<size_t>(n * d)), p(static_cast<size_t>(n));
      for (auto& e : x) e = nd(rng);
      for (auto& e : p) e = ud(rng);
      KvEncodeParams ep;
      ep.scheme = s;
      ep.n_rows = n;
      ep.k = x.data();
      ep.v = x.data();
      ep.out = kv_planes_interleaved(rows.data(), lay);
      kvcodec_encode_ref(ep);
      std::vector<float> eager(static_cast<size_t>(n * d)), rot(eager.size());
      KvDequantParams dp;
      dp.scheme = s;
      dp.n_rows = n;
      dp.in = ep.out;
      dp.v = eager.data();
      kvcodec_dequant_ref(dp);
      dp.v = rot.data();
      dp.v_rotated = true;
      kvcodec_dequant_ref(dp);
      std::vector<float> a(static_cast<size_t>(d), 0.f), b(static_cast<size_t>(d), 0.f);
      double psum = 0, rmax = 0, vmax = 0;
      for (int j = 0; j < n; ++j) {
        psum += p[static_cast<size_t>(j)];
        for (int e = 0; e < d; ++e) {
          a[static_cast<size_t>(e)] +=
              p[static_cast<size_t>(j)] * eager[static_cast<size_t>(j * d + e)];
          b[static_cast<size_t>(e)] +=
              p[static_cast<size_t>(j)] * rot[static_cast<size_t>(j * d + e)];
          rmax =
              std::max(rmax, static_cast<double>(std::fabs(rot[static_cast<size_t>(j * d + e)])));
          vmax =
              std::max(vmax, static_cast<double>(std::fabs(eager[static_cast<size_t>(j * d + e)])));
        }
      }
      quant::fwht_inverse(b.data(), d, quant::turbo_signs(d), quant::turbo_inv_sqrt(d));
      const double u = std::ldexp(1.0, -24);
      const double tol =
          psum * u *
          (2.0 * n * std::max(vmax, rmax) + 2.0 * (std::log2(d) + 1) * std::sqrt(d) * rmax);
      double max_err = 0;
      int at = 0;
      for (int e = 0; e < d; ++e) {
        ASSERT_TRUE(std::isfinite(b[static_cast<size_t>(e)]));
        const double err =
            std::fabs(static_cast<double>(a[static_cast<size_t>(e)]) - b[static_cast<size_t>(e)]);
        if (err > max_err) max_err = err, at = e;
      }
      EXPECT_LE(max_err, tol) << "d " << d << " v" << vb << " at " << at;
    }
}

}  // namespace
}  // namespace tkv::kernels::testing
