// The int8 V dot of the fused attention (attention_fused_vi8.cc) against its scalar
// emulation, bit for bit: same u8 weights, same int8 codebook, exact int32 sums, one
// fused multiply-add into the accumulator. Blocks of 1..32 rows (partial quads),
// 1..8 heads, head_dim 64/128/256, every V width it takes, with unsigned and (the absmax
// value codebook, KvScheme::v_absmax) signed group scales; and the int8 codebooks' fit.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/attention/attention_fused_internal.h"
#include "kernels/attention/attention_quant.h"
#include "kernels/kvcodec/kvcodec.h"
#include "quant/kv_scheme.h"
#include "quant/turbo_tables.h"

namespace tkv::kernels::fused {
namespace {

TEST(FusedInt8V, CodebookFitsEveryCentroid) {
  for (int b = 1; b <= 5; ++b) {
    const float* c = quant::turbo_centroids(b);
    if (!c) continue;
    const Int8Codebook* cb = int8_codebook_for(b);
    ASSERT_NE(cb, nullptr);
    float cmax = 0;
    for (int i = 0; i < (1 << b); ++i) cmax = std::max(cmax, std::fabs(c[i]));
    for (int i = 0; i < 64; ++i) {
      const float c_i = c[i % (1 << b)];
      EXPECT_LE(std::abs(static_cast<int>(cb->q[i])), 127);
      // rounding to the grid: at most half a step off, and the step at most 2 cmax / 127
      EXPECT_LE(std::fabs(cb->q[i] * cb->step - c_i), 0.5f * cb->step * (1 + 1e-6f))
          << b << " " << i;
    }
    EXPECT_LE(cb->step, 2 * cmax / 127);
  }
  for (int b = 2; b <= 5; ++b) {  // absmax: entries 32.. are the negated 0..31
    const float* c = quant::turbo_absmax_centroids(b);
    const Int8Codebook* cb = int8_codebook_for(b, true);
    ASSERT_NE(cb, nullptr);
    for (int i = 0; i < 64; ++i) {
      const float c_i = (i < 32 ? 1.0f : -1.0f) * c[i % (1 << b)];
      EXPECT_LE(std::fabs(cb->q[i] * cb->step - c_i), 0.5f * cb->step * (1 + 1e-6f))
          << b << " " << i;
    }
  }
  EXPECT_EQ(int8_codebook_for(1, true), nullptr);
}

TEST(FusedInt8V, BlockMatchesScalarEmulationExactly) {
  if (!fused_has_avx512()) GTEST_SKIP() << "no AVX-512 VNNI/VBMI on this CPU";
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::uniform_real_distribution<float> ud(0.f, 1.f);
  for (int d : {64, 128, 256})
    for (int vb : {2, 3, 4, 5})
      for (bool absmax : {false, true}) {
        ASSERT_TRUE(value_i8_supported(vb, d));
        quant::KvScheme sch{quant::KvKind::kTurbo, 8, vb, d};
        sch.v_absmax = absmax;
        const quant::KvRowLayout lay = quant::kv_row_layout(sch);
        const int64_t rb = lay.row_bytes;
        std::vector<uint8_t> rows(static_cast<size_t>(kBlock * rb + kKvPoolTailPad), 0);
        std::vector<float> k(static_cast<size_t>(d)), v(k.size());
        for (int t = 0; t < kBlock; ++t) {
          for (int e = 0; e < d; ++e) k[e] = nd(rng), v[e] = nd(rng) * (1 + 3 * ud(rng));
          KvEncodeParams ep;
          ep.scheme = sch;
          ep.n_rows = 1;
          ep.k = k.data();
          ep.v = v.data();
          ep.out = kv_planes_interleaved(rows.data() + t * rb, lay);
          kvcodec_encode_ref(ep);
        }
        RowFmt f;
        f.k_off = lay.k_data_offset, f.v_off = lay.v_data_offset, f.ks_off = lay.k_scale_offset;
        f.kz_off = lay.k_zero_offset, f.vs_off = lay.v_scale_offset, f.head_dim = d;
        f.v_i8 = int8_codebook_for(vb, absmax)->q,
        f.v_i8_step = int8_codebook_for(vb, absmax)->step;
        f.v_signed_scales = absmax;
        int negative = 0;
        for (int t = 0; t < kBlock; ++t)
          for (int g = 0; g < d / 32; ++g)
            negative += (rows[t * rb + lay.v_scale_offset + 2 * g + 1] & 0x80) != 0;
        if (absmax) {
          EXPECT_GT(negative, 0) << "signed scales are exercised";
        }
        for (int nb : {1, 2, 3, 4, 5, 15, 16, 17, 31, 32})
          for (int nt : {1, 3, 4, 5, 8}) {
            alignas(64) float p[kMaxGroup][kBlock] = {};  // pad lanes (t >= nb) stay 0
            for (int g = 0; g < nt; ++g)
              for (int t = 0; t < nb; ++t)  // a spread of weights, some exactly 0 and 1
                p[g][t] = t % 7 == 3 ? 0.0f : t % 5 == 1 ? 1.0f : std::exp(-8 * ud(rng));
            std::vector<float> a(static_cast<size_t>(nt * d)), b;
            for (float& x : a) x = nd(rng);
            b = a;
            float* pa[kMaxGroup];
            float* pb[kMaxGroup];
            for (int g = 0; g < nt; ++g) pa[g] = a.data() + g * d, pb[g] = b.data() + g * d;
            value_block_i8(vb, rows.data(), rb, nb, nt, f, p, pa);
            value_block_i8_ref(vb, rows.data(), rb, nb, nt, f, p, pb);
            for (size_t i = 0; i < a.size(); ++i)
              ASSERT_EQ(a[i], b[i]) << "d " << d << " v" << vb << (absmax ? "a" : "") << " nb "
                                    << nb << " nt " << nt << " at " << i;
          }
      }
}

}  // namespace
}  // namespace tkv::kernels::fused
