// matmul_cpu (both ISAs, 1-3 threads) against the matmul_ref oracle for every
// supported GGUF weight type, with a tolerance derived per output from the Q8
// activation rounding and fp32 accumulation (see tolerance()), plus bitwise
// equality across thread counts. Weights are random bytes with sane fp16 scales.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/matmul/matmul.h"
#include "kernels/matmul/matmul_cpu_internal.h"
#include "quant/ggml_blocks.h"
#include "quant/half.h"

namespace tkv::kernels {
namespace {

using ggml::Type;
constexpr double kU = 5.9604644775390625e-8;  // fp32 unit roundoff 2^-24

uint16_t rand_f16(std::mt19937& rng, float lo, float hi) {
  std::uniform_real_distribution<float> u(lo, hi);
  return f32_to_f16((rng() & 1) ? u(rng) : -u(rng));
}

// Random weights: random code bytes, then every fp16 scale field overwritten
// with a sane value (|d| ~ 1e-2, mins ~ 1e-1) so no Inf/NaN/huge blocks appear.
std::vector<uint8_t> random_weights(Type type, int64_t n_out, int64_t n_in, std::mt19937& rng) {
  const size_t rb = ggml::row_bytes(type, n_in);
  std::vector<uint8_t> buf(rb * static_cast<size_t>(n_out));
  for (auto& b : buf) b = static_cast<uint8_t>(rng());
  std::uniform_real_distribution<float> uf(-1.0f, 1.0f);
  const int64_t n = n_in * n_out;
  auto blocks = [&](auto* p, int64_t count, auto fix) {
    for (int64_t i = 0; i < count; ++i) fix(p[i]);
  };
  switch (type) {
    case Type::kF32: {
      auto* f = reinterpret_cast<float*>(buf.data());
      for (int64_t i = 0; i < n; ++i) f[i] = uf(rng);
      break;
    }
    case Type::kF16: {
      auto* h = reinterpret_cast<uint16_t*>(buf.data());
      for (int64_t i = 0; i < n; ++i) h[i] = f32_to_f16(uf(rng));
      break;
    }
    case Type::kBF16: {
      auto* h = reinterpret_cast<uint16_t*>(buf.data());
      for (int64_t i = 0; i < n; ++i) h[i] = f32_to_bf16(uf(rng));
      break;
    }
    case Type::kQ4_0:
      blocks(reinterpret_cast<ggml::BlockQ4_0*>(buf.data()), n / 32,
             [&](auto& b) { b.d = rand_f16(rng, 0.005f, 0.02f); });
      break;
    case Type::kQ5_0:
      blocks(reinterpret_cast<ggml::BlockQ5_0*>(buf.data()), n / 32,
             [&](auto& b) { b.d = rand_f16(rng, 0.005f, 0.02f); });
      break;
    case Type::kQ8_0:
      blocks(reinterpret_cast<ggml::BlockQ8_0*>(buf.data()), n / 32,
             [&](auto& b) { b.d = rand_f16(rng, 0.0005f, 0.002f); });
      break;
    case Type::kQ4_1:
      blocks(reinterpret_cast<ggml::BlockQ4_1*>(buf.data()), n / 32, [&](auto& b) {
        b.d = rand_f16(rng, 0.005f, 0.02f);
        b.m = rand_f16(rng, 0.01f, 0.2f);
      });
      break;
    case Type::kQ5_1:
      blocks(reinterpret_cast<ggml::BlockQ5_1*>(buf.data()), n / 32, [&](auto& b) {
        b.d = rand_f16(rng, 0.005f, 0.02f);
        b.m = rand_f16(rng, 0.01f, 0.2f);
      });
      break;
    case Type::kQ2_K:
      blocks(reinterpret_cast<ggml::BlockQ2_K*>(buf.data()), n / 256, [&](auto& b) {
        b.d = rand_f16(rng, 0.001f, 0.004f);
        b.dmin = rand_f16(rng, 0.001f, 0.004f);
      });
      break;
    case Type::kQ3_K:
      blocks(reinterpret_cast<ggml::BlockQ3_K*>(buf.data()), n / 256,
             [&](auto& b) { b.d = rand_f16(rng, 0.001f, 0.004f); });
      break;
    case Type::kQ4_K:
      blocks(reinterpret_cast<ggml::BlockQ4_K*>(buf.data()), n / 256, [&](auto& b) {
        b.d = rand_f16(rng, 0.0005f, 0.002f);
        b.dmin = rand_f16(rng, 0.0005f, 0.002f);
      });
      break;
    case Type::kQ5_K:
      blocks(reinterpret_cast<ggml::BlockQ5_K*>(buf.data()), n / 256, [&](auto& b) {
        b.d = rand_f16(rng, 0.0005f, 0.002f);
        b.dmin = rand_f16(rng, 0.0005f, 0.002f);
      });
      break;
    case Type::kQ6_K:
      blocks(reinterpret_cast<ggml::BlockQ6_K*>(buf.data()), n / 256,
             [&](auto& b) { b.d = rand_f16(rng, 0.0002f, 0.001f); });
      break;
    default:
      ADD_FAILURE() << "no generator for type " << static_cast<int>(type);
  }
  return buf;
}

// The same row with every weight code set to zero, so dequantizing it gives the
// per-element constant c_i of w_i = s_i*q_i + c_i (offsets and mins).
std::vector<uint8_t> zero_codes(Type type, const uint8_t* row, size_t rb) {
  std::vector<uint8_t> z(row, row + rb);
  auto each = [&](auto* p, size_t count, auto fix) {
    for (size_t i = 0; i < count; ++i) fix(p[i]);
  };
  switch (type) {
    case Type::kQ4_0:
      each(reinterpret_cast<ggml::BlockQ4_0*>(z.data()), rb / 18,
           [](auto& b) { std::memset(b.qs, 0, 16); });
      break;
    case Type::kQ4_1:
      each(reinterpret_cast<ggml::BlockQ4_1*>(z.data()), rb / 20,
           [](auto& b) { std::memset(b.qs, 0, 16); });
      break;
    case Type::kQ5_0:
      each(reinterpret_cast<ggml::BlockQ5_0*>(z.data()), rb / 22, [](auto& b) {
        std::memset(b.qs, 0, 16);
        std::memset(b.qh, 0, 4);
      });
      break;
    case Type::kQ5_1:
      each(reinterpret_cast<ggml::BlockQ5_1*>(z.data()), rb / 24, [](auto& b) {
        std::memset(b.qs, 0, 16);
        std::memset(b.qh, 0, 4);
      });
      break;
    case Type::kQ4_K:
      each(reinterpret_cast<ggml::BlockQ4_K*>(z.data()), rb / 144,
           [](auto& b) { std::memset(b.qs, 0, 128); });
      break;
    case Type::kQ5_K:
      each(reinterpret_cast<ggml::BlockQ5_K*>(z.data()), rb / 176, [](auto& b) {
        std::memset(b.qs, 0, 128);
        std::memset(b.qh, 0, 32);
      });
      break;
    case Type::kQ6_K:
      each(reinterpret_cast<ggml::BlockQ6_K*>(z.data()), rb / 210, [](auto& b) {
        std::memset(b.ql, 0, 128);
        std::memset(b.qh, 0, 64);
      });
      break;
    default:
      std::memset(z.data(), 0, rb);
      break;  // no separate constant: c = 0 (Q8_0 codes are signed)
  }
  return z;
}

// Bound on |y_cpu - y_ref| for one output (w: dequantized row, c: its constants).
//  * Q8 activation rounding: |x_i - d*q_i| <= d/2 with d = amax/127 of the block, plus
//    |q_i|*|d - fp16(d)| <= 127*d*2^-11 for the 32-blocks (their d is stored in fp16);
//    Q8_K keeps d in fp32 (two roundings: 127*d*2^-22). Contributes sum |w_i|*e_i.
//  * Q8_1 only: s = fp16(d*sum q) vs the exact d16*sum q differ by <= 2^-10*d*sum|q|,
//    with d|q_i| <= |x_i| + d/2, times |c_i| (the min m).
//  * fp32 accumulation of terms whose magnitudes sum to S <= sum (|w_i|+2|c_i|)(|x_i|+e_i)
//    (the kernels scale s_i*q_i and c_i separately): per lane <= n_in/8 FMAs + 16 more
//    roundings (scale products, hsum, constants dot) -> (n_in/8 + 16)*u*S; ref rounding u*|y|.
double tolerance(const float* w, const float* c, const float* x, int64_t n, int act_block,
                 bool q8_1, double y_ref) {
  double quant = 0.0, s_term = 0.0, mag = 0.0;
  for (int64_t b0 = 0; b0 < n; b0 += (act_block ? act_block : n)) {
    const int64_t b1 = act_block ? b0 + act_block : n;
    double amax = 0.0;
    for (int64_t i = b0; i < b1; ++i) amax = std::max(amax, std::fabs(static_cast<double>(x[i])));
    const double d = amax / 127.0;
    const double e =
        act_block == 0
            ? 0.0
            : d / 2 + 127.0 * d * (act_block == 32 ? std::ldexp(1.0, -11) : std::ldexp(1.0, -22));
    for (int64_t i = b0; i < b1; ++i) {
      const double ax = std::fabs(static_cast<double>(x[i]));
      quant += std::fabs(static_cast<double>(w[i])) * e;
      if (q8_1)
        s_term +=
            std::fabs(static_cast<double>(c[i])) * std::ldexp(1.0, -10) * 1.001 * (ax + d / 2);
      mag += (std::fabs(static_cast<double>(w[i])) + 2.0 * std::fabs(static_cast<double>(c[i]))) *
             (ax + e);
    }
  }
  return quant + s_term + (static_cast<double>(n) / 8 + 16) * kU * mag + kU * std::fabs(y_ref);
}

int act_block_of(Type t) {
  ActKind k;
  if (!act_kind_for(t, &k)) return 0;
  return k == ActKind::kQ8_K ? 256 : 32;
}

struct Case {
  Type type;
  std::vector<int64_t> n_ins;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << ggml::traits(c.type).name;
}

class MatmulCpuTest : public ::testing::TestWithParam<Case> {};

TEST_P(MatmulCpuTest, MatchesRefWithinDerivedBoundAndIsThreadDeterministic) {
  const Case& cs = GetParam();
  const Type type = cs.type;
  std::mt19937 rng(1234 + static_cast<unsigned>(type));
  std::vector<CpuIsa> isas = {CpuIsa::kAvx2};
  if (cpu_has_avx512_vnni()) isas.push_back(CpuIsa::kAvx512Vnni);
  ThreadPool pool1(1), pool2(2), pool3(3);
  ThreadPool* pools[3] = {&pool1, &pool2, &pool3};
  const int ab = act_block_of(type);
  ActKind kind;
  const bool q8_1 = act_kind_for(type, &kind) && kind == ActKind::kQ8_1;
  double worst_ratio = 0.0;
  for (int64_t n_in : cs.n_ins) {
    for (int64_t n_out : {1, 5, 64, 129}) {
      std::vector<uint8_t> wq = random_weights(type, n_out, n_in, rng);
      const size_t rb = ggml::row_bytes(type, n_in);
      std::vector<float> wf(static_cast<size_t>(n_in * n_out)), cf(wf.size());
      for (int64_t o = 0; o < n_out; ++o) {
        dequantize_row(type, wq.data() + o * rb, wf.data() + o * n_in, n_in);
        const std::vector<uint8_t> z = zero_codes(type, wq.data() + o * rb, rb);
        dequantize_row(type, z.data(), cf.data() + o * n_in, n_in);
      }
      const WeightView w{wq.data(), type, n_in, n_out};
      for (int64_t n_tokens : {1, 2, 3, 7, 16, 33}) {
        std::uniform_real_distribution<float> ux(-1.0f, 1.0f);
        std::vector<float> x(static_cast<size_t>(n_tokens * n_in));
        for (auto& v : x) v = ux(rng);
        std::vector<float> y_ref(static_cast<size_t>(n_tokens * n_out));
        matmul_ref(w, x.data(), y_ref.data(), n_tokens);
        for (CpuIsa isa : isas) {
          std::vector<float> y1(y_ref.size(), NAN);
          matmul_cpu_isa(w, x.data(), y1.data(), n_tokens, pool1, isa);
          for (int64_t t = 0; t < n_tokens; ++t) {
            for (int64_t o = 0; o < n_out; ++o) {
              const size_t i = static_cast<size_t>(t * n_out + o);
              const double tol = tolerance(wf.data() + o * n_in, cf.data() + o * n_in,
                                           x.data() + t * n_in, n_in, ab, q8_1, y_ref[i]);
              const double err = std::fabs(static_cast<double>(y1[i]) - y_ref[i]);
              ASSERT_TRUE(std::isfinite(y1[i])) << "non-finite at t=" << t << " o=" << o;
              worst_ratio = std::max(worst_ratio, err / tol);
              ASSERT_LE(err, tol) << "type " << static_cast<int>(type) << " isa "
                                  << static_cast<int>(isa) << " n_in=" << n_in << " n_out=" << n_out
                                  << " n_tokens=" << n_tokens << " t=" << t << " o=" << o
                                  << " cpu=" << y1[i] << " ref=" << y_ref[i];
            }
          }
          for (int p = 1; p < 3; ++p) {
            std::vector<float> yp(y_ref.size(), NAN);
            matmul_cpu_isa(w, x.data(), yp.data(), n_tokens, *pools[p], isa);
            ASSERT_EQ(0, std::memcmp(yp.data(), y1.data(), yp.size() * sizeof(float)))
                << "threads=" << p + 1 << " differs bitwise from 1 thread; n_in=" << n_in
                << " n_out=" << n_out << " n_tokens=" << n_tokens;
          }
        }
      }
    }
  }
  std::printf("[matmul] type %d: worst |cpu-ref|/tol = %.3f\n", static_cast<int>(type),
              worst_ratio);
}

// Many-token calls (the 16-row AVX-512 panels from 16 tokens on) give the same bits
// as one-token calls for the 32-element block types, whose panels keep kernel32's
// fp32 order; K-quant panels use their own order, so for them only the bound above holds.
TEST(MatmulCpu, PrefillEqualsDecodeBitwiseFor32Blocks) {
  std::vector<CpuIsa> isas = {CpuIsa::kAvx2};
  if (cpu_has_avx512_vnni()) isas.push_back(CpuIsa::kAvx512Vnni);
  ThreadPool pool(2);
  std::mt19937 rng(99);
  for (Type type : {Type::kQ4_0, Type::kQ4_1, Type::kQ5_0, Type::kQ5_1, Type::kQ8_0}) {
    for (int64_t n_in : {576, 1536}) {
      const int64_t n_out = 37, n_tokens = 35;  // two full 16-row panels and 5 rows left over
      const std::vector<uint8_t> wq = random_weights(type, n_out, n_in, rng);
      const WeightView w{wq.data(), type, n_in, n_out};
      std::uniform_real_distribution<float> ux(-1.0f, 1.0f);
      std::vector<float> x(static_cast<size_t>(n_tokens * n_in));
      for (auto& v : x) v = ux(rng);
      for (CpuIsa isa : isas) {
        std::vector<float> yp(static_cast<size_t>(n_tokens * n_out)), yd(yp.size());
        matmul_cpu_isa(w, x.data(), yp.data(), n_tokens, pool, isa);
        for (int64_t t = 0; t < n_tokens; ++t)
          matmul_cpu_isa(w, x.data() + t * n_in, yd.data() + t * n_out, 1, pool, isa);
        ASSERT_EQ(0, std::memcmp(yp.data(), yd.data(), yp.size() * sizeof(float)))
            << "type " << static_cast<int>(type) << " isa " << static_cast<int>(isa)
            << " n_in=" << n_in;
      }
    }
  }
}

// matmul_cpu_multi (one quantization, one parallel loop) equals separate calls bitwise,
// weights of mixed types and activation kinds included.
TEST(MatmulCpu, MultiEqualsSeparateCallsBitwise) {
  std::mt19937 rng(7);
  const int64_t n_in = 512;
  const Type types[] = {Type::kQ4_K, Type::kQ6_K, Type::kQ8_0, Type::kF32};
  const int64_t n_outs[] = {48, 37, 16, 5};
  std::vector<std::vector<uint8_t>> bufs;
  std::vector<WeightView> ws;
  for (int i = 0; i < 4; ++i) {
    bufs.push_back(random_weights(types[i], n_outs[i], n_in, rng));
    ws.push_back({bufs.back().data(), types[i], n_in, n_outs[i]});
  }
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    for (int64_t n_tokens : {1, 35}) {
      std::uniform_real_distribution<float> ux(-1.0f, 1.0f);
      std::vector<float> x(static_cast<size_t>(n_tokens * n_in));
      for (auto& v : x) v = ux(rng);
      std::vector<std::vector<float>> sep(4), mul(4);
      float* ys[4];
      for (int i = 0; i < 4; ++i) {
        sep[i].assign(static_cast<size_t>(n_tokens * n_outs[i]), NAN);
        mul[i].assign(sep[i].size(), NAN);
        matmul_cpu(ws[i], x.data(), sep[i].data(), n_tokens, pool);
        ys[i] = mul[i].data();
      }
      matmul_cpu_multi(ws.data(), 4, x.data(), ys, n_tokens, pool);
      for (int i = 0; i < 4; ++i)
        ASSERT_EQ(0, std::memcmp(sep[i].data(), mul[i].data(), sep[i].size() * sizeof(float)))
            << "weight " << i << " threads " << threads << " n_tokens " << n_tokens;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    AllTypes, MatmulCpuTest,
    ::testing::Values(Case{Type::kF32, {37, 576}}, Case{Type::kF16, {37, 576}},
                      Case{Type::kBF16, {37, 576}}, Case{Type::kQ4_0, {64, 576}},
                      Case{Type::kQ4_1, {64, 576, 1536}}, Case{Type::kQ5_0, {64, 576}},
                      Case{Type::kQ5_1, {64, 576}}, Case{Type::kQ8_0, {64, 576, 1536}},
                      Case{Type::kQ2_K, {256}}, Case{Type::kQ3_K, {256}},
                      Case{Type::kQ4_K, {256, 1536}}, Case{Type::kQ5_K, {256, 1536}},
                      Case{Type::kQ6_K, {256, 1536}}),
    [](const ::testing::TestParamInfo<Case>& param_info) {
      return std::string(ggml::traits(param_info.param.type).name);
    });

}  // namespace
}  // namespace tkv::kernels
