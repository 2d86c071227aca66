// CUDA fused decode attention (decode_attention_cuda) = reference attention over
// the dequantized cache (fp64, from kvcodec_dequant_ref), for every turbo width,
// head_dim 64..512, bf16, GQA 1/3/4/8, a ragged batch of contexts 1, 511, 512, 513,
// 4097, auto split and a single partition; every output written and finite; and
// the same input twice gives the same bits (tensor-core path: also with caller-kept
// merge counters, which each call must leave zero).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "base/status.h"
#include "kernels/attention_cuda/attention_cuda.h"
#include "kernels/kvcodec/kvcodec.h"
#include "kernels/kvcodec/kvcodec_cuda.h"
#include "tests/cuda/cuda_test_util.h"

namespace tkv::testing {
namespace {

struct Case {
  quant::KvScheme f;
  int n_kv_heads = 2, gqa = 4;
  int page_size = 16;
};

struct Problem {
  HostPagedCache cache;
  std::vector<float> k_hat, v_hat;  // [rows, head_dim] dequantized cache (V un-rotated)
  std::vector<uint16_t> q;          // [n_seqs, n_heads, head_dim] bf16
  int n_heads = 0;
};

Problem make_problem(const Case& c, const std::vector<int32_t>& lens, std::mt19937& rng) {
  Problem pr;
  const int d = c.f.head_dim;
  pr.n_heads = c.n_kv_heads * c.gqa;
  pr.cache = make_paged_cache(c.f, c.n_kv_heads, c.page_size, lens, rng);
  std::normal_distribution<float> n01(0.0f, 1.0f);
  fill_paged_cache(pr.cache, lens, rng, n01, &pr.k_hat, &pr.v_hat);
  pr.q.resize((size_t)lens.size() * pr.n_heads * d);
  for (uint16_t& x : pr.q) x = f32_to_bf16(n01(rng));
  return pr;
}

// Runs the GPU decode; returns bf16 out [n_seqs, n_heads, head_dim].
std::vector<uint16_t> run_gpu(const Problem& pr, int partition_tokens, int minb = 0,
                              bool general = false, bool* tensor_cores = nullptr, int sm_count = 0,
                              int* mma_warps = nullptr) {
  const HostPagedCache& h = pr.cache;
  DevicePagedCache dev;
  dev.upload(h);
  DeviceBuffer<uint16_t> dq, dout(pr.q.size());
  dq.upload(pr.q);
  dout.fill_bytes(0xff);  // bf16 NaN: an unwritten output fails the finite check
  kernels::DecodeCudaParams p;
  p.kv = dev.view(h);
  p.n_seqs = (int)h.seq_lens.size();
  p.n_heads = pr.n_heads;
  for (int32_t len : h.seq_lens) p.max_seq_len = std::max(p.max_seq_len, (int)len);
  p.softmax_scale = 1.0f / std::sqrt((float)h.format.head_dim);
  p.q = dq.get();
  p.out = dout.get();
  p.partition_tokens = partition_tokens;
  p.min_blocks_per_sm = minb;
  p.general_kernel = general;
  p.sm_count = sm_count;
  if (tensor_cores) *tensor_cores = kernels::decode_uses_tensor_cores(p);
  if (mma_warps) *mma_warps = kernels::decode_plan(p).mma_warps;
  DeviceBuffer<uint8_t> ws(kernels::decode_workspace_bytes(p));
  ws.fill_bytes(0xab);  // garbage partials and merge counters: the call must not depend on them
  p.workspace = ws.get();
  p.workspace_bytes = (int64_t)ws.size();
  Status st = kernels::decode_attention_cuda(p);
  EXPECT_TRUE(st.ok()) << st.to_string();
  TKV_CUDA_CHECK(cudaDeviceSynchronize());
  // Again on the used workspace (the counters a first call left behind), into a fresh output.
  const std::vector<uint16_t> first = dout.download();
  dout.fill_bytes(0xff);
  st = kernels::decode_attention_cuda(p);
  EXPECT_TRUE(st.ok()) << st.to_string();
  TKV_CUDA_CHECK(cudaDeviceSynchronize());
  EXPECT_EQ(std::memcmp(first.data(), dout.download().data(), first.size() * 2), 0)
      << "second call on the same workspace differs";
  {
    // The same pages as a block table [n_seqs, stride] (page_stride, vLLM's layout) padded with
    // pages far past the cache (a kernel using one faults or differs), page_indptr null.
    const std::vector<int32_t> table = block_table(h, 3, 1 << 28);
    DeviceBuffer<int32_t> dtab;
    dtab.upload(table);
    kernels::DecodeCudaParams pt = p;
    pt.kv.page_stride = (int)(table.size() / h.seq_lens.size());
    pt.kv.page_indices = dtab.get();
    pt.kv.page_indptr = nullptr;
    dout.fill_bytes(0xff);
    st = kernels::decode_attention_cuda(pt);
    EXPECT_TRUE(st.ok()) << st.to_string();
    TKV_CUDA_CHECK(cudaDeviceSynchronize());
    EXPECT_EQ(std::memcmp(first.data(), dout.download().data(), first.size() * 2), 0)
        << "block table (page_stride " << pt.kv.page_stride << ") differs from the CSR page table";
  }
  if (!kernels::decode_uses_tensor_cores(p)) {
    // fp32 q and out (q_f32/out_f32, the whole-model forward's path): q widened exactly, so
    // the same sums; the fp32 output rounded to bf16 (RNE) is the bf16 output, bit for bit.
    std::vector<float> qf(pr.q.size());
    for (size_t i = 0; i < qf.size(); ++i) qf[i] = bf16_to_f32(pr.q[i]);
    DeviceBuffer<float> dqf, doutf(pr.q.size());
    dqf.upload(qf);
    doutf.fill_bytes(0xff);  // NaN: an unwritten output differs
    kernels::DecodeCudaParams pf = p;
    pf.q = nullptr;
    pf.out = nullptr;
    pf.q_f32 = dqf.get();
    pf.out_f32 = doutf.get();
    st = kernels::decode_attention_cuda(pf);
    EXPECT_TRUE(st.ok()) << st.to_string();
    TKV_CUDA_CHECK(cudaDeviceSynchronize());
    const std::vector<float> of = doutf.download();
    size_t differ = 0;
    for (size_t i = 0; i < of.size(); ++i) differ += f32_to_bf16(of[i]) != first[i];
    EXPECT_EQ(differ, 0u) << "fp32 q/out differ from the bf16 path";
  }
  if (kernels::decode_uses_tensor_cores(p)) {
    // Caller-kept merge counters (no per-call reset): zeroed once, twice in a row (the
    // second call relies on the first leaving them zero), same bits; zero at the end.
    DeviceBuffer<int32_t> ctr((size_t)p.n_seqs * p.n_heads);
    ctr.fill_bytes(0);
    p.merge_counters = ctr.get();
    for (int call = 0; call < 2; ++call) {
      dout.fill_bytes(0xff);
      st = kernels::decode_attention_cuda(p);
      EXPECT_TRUE(st.ok()) << st.to_string();
      TKV_CUDA_CHECK(cudaDeviceSynchronize());
      EXPECT_EQ(std::memcmp(first.data(), dout.download().data(), first.size() * 2), 0)
          << "call " << call << " with caller-kept merge counters differs";
    }
    const std::vector<int32_t> left = ctr.download();
    EXPECT_EQ(std::count(left.begin(), left.end(), 0), (std::ptrdiff_t)left.size())
        << "merge counters left non-zero";
  }
  return first;
}

// fp64 attention over the dequantized cache vs the GPU, with the derived bound:
// |out - ref| <= 2^-8 |ref|                        (bf16 output, RNE)
//              + 8 eps vmax (2 sqrt(D) S + sqrt(T) + log2(D) sqrt(D) + 8)
// eps = 2^-24: fp32 q.k over D terms (score error sqrt(D) eps S, S = max_t scale
// sum|q k|, moves the output by <= 2 dS vmax), the fp32 sum of T weighted values,
// the FWHT's log2(D) stages over sqrt(D)-sized sums, and ex2.approx (~2^-22 rel).
// Tensor-core path (decode_uses_tensor_cores) adds, from its fp16 operands:
//   + 3 * 2^-11 * sum_t p_t |v_t,i| / l   P, the centroid and centroid*scale rounded to
//                                        fp16 (2^-11 relative each, first order)
//   + 2^-25 (T vmax + 1)                 fp16 subnormals: P < 2^-14 and |v| < 2^-14
//                                        (absolute 2^-25 per token / element)
//   + 2 vmax * D 2^-23 S                 fp32 steps after the exact integer group sums
//                                        (worst case one 2^-23-relative error per term)
//   + 2 vmax * scale 2^-14 max|q| K1     q rounded to 16-bit integers (max |q| 2^e in
//                                        [2^13, 2^14): |dq| <= 2^-14 max|q|), K1 = max_t sum|k|
// and for a bf16 cache (q and K bf16 as stored, products exact, fp32 tensor-core sums):
//   + 2 vmax * D 2^-23 S                 the Q·K sums (one 2^-23-relative error per term)
//   + 2^-9 sum_t p_t |v_t,i| / l         P rounded to bf16 for the P·V mma
//   + (T/16 + 16) 2^-22 sum_t p_t |v_t,i| / l   fp32 accumulation per 16-token mma (2 ulps)
void check_against_reference(const Problem& pr, const std::vector<uint16_t>& got,
                             const std::string& what, bool tensor_cores = false) {
  const HostPagedCache& h = pr.cache;
  const int d = h.format.head_dim, gqa = pr.n_heads / h.n_kv_heads;
  const double scale = 1.0 / std::sqrt((double)d), eps = std::ldexp(1.0, -24);
  double worst = 0.0;
  std::string worst_at;
  for (int s = 0; s < (int)h.seq_lens.size(); ++s) {
    const int T = h.seq_lens[s];
    for (int hq = 0; hq < pr.n_heads; ++hq) {
      const int kvh = hq / gqa;
      std::vector<double> sc(T), out(d, 0.0), out_abs(d, 0.0);
      double mx = -INFINITY, smax = 0.0, vmax = 0.0, l = 0.0, qmax = 0.0, k1 = 0.0;
      for (int i = 0; i < d; ++i)
        qmax = std::max(
            qmax, (double)std::fabs(bf16_to_f32(pr.q[((size_t)s * pr.n_heads + hq) * d + i])));
      for (int t = 0; t < T; ++t) {
        const float* kr = &pr.k_hat[h.row(s, t, kvh) * d];
        double dot = 0.0, mag = 0.0, ka = 0.0;
        for (int i = 0; i < d; ++i) {
          ka += std::fabs(kr[i]);
          const double qi = bf16_to_f32(pr.q[((size_t)s * pr.n_heads + hq) * d + i]);
          dot += qi * kr[i];
          mag += std::fabs(qi * kr[i]);
        }
        sc[t] = dot * scale;
        k1 = std::max(k1, ka);
        smax = std::max(smax, mag * scale);
        mx = std::max(mx, sc[t]);
      }
      for (int t = 0; t < T; ++t) {
        const double p = std::exp(sc[t] - mx);
        l += p;
        const float* vr = &pr.v_hat[h.row(s, t, kvh) * d];
        for (int i = 0; i < d; ++i) {
          out[i] += p * vr[i], out_abs[i] += p * std::fabs(vr[i]);
          vmax = std::max(vmax, (double)std::fabs(vr[i]));
        }
      }
      double abs_tol = 8 * eps * vmax *
                       (2 * std::sqrt((double)d) * smax + std::sqrt((double)T) +
                        std::log2(d) * std::sqrt(d) + 8);
      if (tensor_cores && h.format.is_float())
        abs_tol += 2 * vmax * d * std::ldexp(1.0, -23) * smax;
      else if (tensor_cores)
        abs_tol += std::ldexp(1.0, -25) * (T * vmax + 1) +
                   2 * vmax * d * std::ldexp(1.0, -23) * smax +
                   2 * vmax * scale * std::ldexp(qmax, -14) * k1;
      for (int i = 0; i < d; ++i) {
        const double ref = T > 0 ? out[i] / l : 0.0;
        const float g = bf16_to_f32(got[((size_t)s * pr.n_heads + hq) * d + i]);
        ASSERT_TRUE(std::isfinite(g))
            << what << " non-finite/unwritten out seq " << s << " head " << hq << " i " << i;
        const double tc_w = h.format.is_float()
                                ? std::ldexp(1.0, -9) + (T / 16 + 16) * std::ldexp(1.0, -22)
                                : 3 * std::ldexp(1.0, -11);
        const double tc_rel = tensor_cores && T > 0 ? tc_w * out_abs[i] / l : 0.0;
        const double err = std::fabs(g - ref),
                     tol = std::ldexp(std::fabs(ref), -8) + abs_tol + tc_rel;
        if (err / tol > worst)
          worst = err / tol, worst_at = "seq " + std::to_string(s) + " (T=" + std::to_string(T) +
                                        ") head " + std::to_string(hq) + " i " + std::to_string(i);
        ASSERT_LE(err, tol) << what << " seq " << s << " (T=" << T << ") head " << hq << " i " << i
                            << " got " << g << " ref " << ref;
      }
    }
  }
  std::printf("%-22s max err/tol %.3f at %s\n", what.c_str(), worst, worst_at.c_str());
}

const std::vector<int32_t> kRagged = {1, 511, 512, 513, 4097};

// Every case on the kernel decode_attention_cuda picks; where that is the tensor-core
// path, also on the general FP32 kernel (general = true), which stays the fallback.
void run_case(const Case& c, std::mt19937& rng, int minb = 0,
              const std::vector<int32_t>& lens = kRagged) {
  const Problem pr = make_problem(c, lens, rng);
  for (bool general : {false, true}) {
    bool tc = false;
    const std::vector<uint16_t> a = run_gpu(pr, 0, minb, general, &tc);
    const std::string name = format_name(c.f) + "/gqa" + std::to_string(c.gqa) +
                             (c.n_kv_heads != 2 ? "/kv" + std::to_string(c.n_kv_heads) : "") +
                             (c.page_size != 16 ? "/ps" + std::to_string(c.page_size) : "") +
                             (minb ? "/minb3" : "") +
                             (tc        ? "/mma"
                              : general ? "/fp32"
                                        : "");
    check_against_reference(pr, a, name + "/auto", tc);
    check_against_reference(pr, run_gpu(pr, 4160, minb, general), name + "/1part", tc);
    check_against_reference(pr, run_gpu(pr, 64, minb, general), name + "/p64", tc);
    const std::vector<uint16_t> b = run_gpu(pr, 0, minb, general);
    ASSERT_EQ(std::memcmp(a.data(), b.data(), a.size() * 2), 0)
        << name << ": same input, different bits";
    if (!tc) break;  // the general kernel was the one picked: tested
  }
}

TEST(AttentionCuda, TurboEveryWidthAndHeadDim) {
  TKV_SKIP_WITHOUT_GPU();
  std::mt19937 rng(42);
  for (int d : {128, 64, 256, 512}) {
    for (int kb : {8, 5, 4, 3, 2}) {
      for (int vb : {1, 2, 3, 4, 5, 8}) {
        run_case({turbo_format(kb, vb, d, true)}, rng);
        if (HasFatalFailure()) return;
      }
    }
    run_case({turbo_format(8, 3, d, false)}, rng);  // unsigned 8-bit keys
    if (HasFatalFailure()) return;
  }
}

TEST(AttentionCuda, Bf16EveryHeadDim) {
  TKV_SKIP_WITHOUT_GPU();
  std::mt19937 rng(43);
  for (int d : {64, 128, 256, 512}) {
    run_case({bf16_format(d)}, rng);
    if (HasFatalFailure()) return;
  }
}

TEST(AttentionCuda, GqaRatios) {
  TKV_SKIP_WITHOUT_GPU();
  std::mt19937 rng(44);
  for (int gqa : {1, 2, 3, 8}) {
    for (const quant::KvScheme& f : {turbo_format(8, 3, 128, true), bf16_format(128)}) {
      run_case({f, 2, gqa}, rng);
      if (HasFatalFailure()) return;
    }
  }
}

// The tensor-core path's load variants: TMA page boxes (K, V) and 1-D bulk copies (scale
// rows) for page_size >= 16, cp.async for page_size 8; odd and even n_kv_heads.
TEST(AttentionCuda, MmaPageSizesAndKvHeads) {
  TKV_SKIP_WITHOUT_GPU();
  std::mt19937 rng(46);
  const quant::KvScheme k8v3 = turbo_format(8, 3, 128, true), k8v4 = turbo_format(8, 4, 128, true),
                        k8uv4 = turbo_format(8, 4, 128, false);
  const quant::KvScheme k4v3 = turbo_format(4, 3, 128, false),
                        k4v2 = turbo_format(4, 2, 128, false), bf16 = bf16_format(128);
  for (const Case& c :
       {Case{bf16, 2, 4, 8}, Case{bf16, 3, 4, 16}, Case{bf16, 2, 8, 64}, Case{bf16, 1, 4, 128},
        Case{k8v3, 2, 4, 8}, Case{k8v4, 2, 4, 8}, Case{k8v3, 2, 4, 32}, Case{k8v4, 2, 8, 64},
        Case{k8v3, 3, 4, 16}, Case{k8uv4, 1, 4, 16}, Case{k8v4, 3, 4, 32}, Case{k4v3, 2, 4, 8},
        Case{k4v2, 3, 4, 16}, Case{k4v3, 2, 8, 32}, Case{k8v3, 2, 4, 64}, Case{k8v3, 3, 4, 128},
        Case{k4v2, 2, 4, 256}, Case{k4v3, 1, 8, 64}}) {  // >= 64: one copy per page and plane
    run_case(c, rng);
    if (HasFatalFailure()) return;
  }
}

// Empty sequences (zeros out, no partition counted) beside short and long ones, in the
// tensor-core kernel's merge and the reduce kernel's.
TEST(AttentionCuda, EmptySequences) {
  TKV_SKIP_WITHOUT_GPU();
  std::mt19937 rng(47);
  for (const quant::KvScheme& f :
       {turbo_format(8, 3, 128, true), turbo_format(4, 3, 128, true), bf16_format(128)}) {
    run_case({f, 2, 4}, rng, 0, {0, 700, 1, 0, 4100});
    if (HasFatalFailure()) return;
  }
}

// More partitions than the tensor-core merge keeps weights for in shared memory (2400 per
// head for v3): 2501 partitions of 64 tokens, the weights past 2400 recomputed.
TEST(AttentionCuda, MmaManyPartitions) {
  TKV_SKIP_WITHOUT_GPU();
  std::mt19937 rng(48);
  const Problem pr = make_problem({turbo_format(8, 3, 128, true), 1, 4}, {2500 * 64 + 5}, rng);
  bool tc = false;
  check_against_reference(pr, run_gpu(pr, 64, 0, false, &tc), "k8v3/2501 parts", true);
  EXPECT_TRUE(tc);
}

// The tensor-core kernel's one-block-per-SM variant (16 consumer warps, 256-token stages),
// which the planner picks when the grid is one wave of the GPU's SMs and the context is
// >= 8192: ragged long sequences (some partitions past a sequence's end), TMA and cp.async
// loads (page 16 / 8), auto and explicit splits; the 8-warp variant elsewhere.
TEST(AttentionCuda, MmaOneBlockPerSm) {
  TKV_SKIP_WITHOUT_GPU();
  int sms = 0;
  TKV_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  std::mt19937 rng(49);
  const quant::KvScheme k8v3 = turbo_format(8, 3, 128, true), k8v4 = turbo_format(8, 4, 128, true),
                        k4v2 = turbo_format(4, 2, 128, false);
  const quant::KvScheme bf16 = bf16_format(128);  // one block per SM too, with 8 consumer warps
  for (const Case& c :
       {Case{k8v3, 2, 4, 16}, Case{k8v4, 2, 4, 16}, Case{k8v3, 2, 4, 8}, Case{k4v2, 2, 4, 16},
        Case{k8v3, 2, 4, 64}, Case{bf16, 2, 4, 64}, Case{bf16, 2, 4, 16}}) {
    const int one_wave_warps = c.f.is_float() ? 8 : 16;
    const Problem pr = make_problem(c, {9000, 20000, 8195}, rng);
    const std::string name =
        format_name(c.f) + "/ps" + std::to_string(c.page_size) + "/1 block per SM";
    bool tc = false;
    int warps = 0;
    const std::vector<uint16_t> a = run_gpu(pr, 0, 0, false, &tc, sms, &warps);
    ASSERT_TRUE(tc);
    EXPECT_EQ(warps, one_wave_warps) << name;
    check_against_reference(pr, a, name + "/auto", true);
    check_against_reference(pr, run_gpu(pr, 20480, 0, false, nullptr, sms, &warps), name + "/1part",
                            true);
    EXPECT_EQ(warps, one_wave_warps) << name << "/1part";
    ASSERT_EQ(std::memcmp(a.data(), run_gpu(pr, 0, 0, false, nullptr, sms).data(), a.size() * 2), 0)
        << name << ": same input, different bits";
    check_against_reference(pr, run_gpu(pr, 256, 0, false, nullptr, sms, &warps),
                            name + "/p256 (8 warps)", true);
    EXPECT_EQ(warps, 8) << name << "/p256";
    if (HasFatalFailure()) return;
  }
}

// The register-capped (3 blocks/SM) instantiations of the benchmarked schemes.
TEST(AttentionCuda, OccupancyVariant) {
  TKV_SKIP_WITHOUT_GPU();
  std::mt19937 rng(45);
  for (const quant::KvScheme& f :
       {turbo_format(8, 3, 128, true), turbo_format(8, 4, 128, true), turbo_format(4, 3, 128, true),
        turbo_format(4, 2, 128, true), bf16_format(128)}) {
    run_case({f, 2, 4}, rng, 3);
    if (HasFatalFailure()) return;
  }
}

// Programmatic launch (PDL) in a decode step: the encode of each sequence's new token into
// its last slot, then two decodes back to back, no host sync between the three; both
// decodes must give the bits of encode, sync, plain decode (the first waits for the encode's
// row, the second for the counters the first leaves zero).
TEST(AttentionCuda, MmaProgrammaticLaunch) {
  TKV_SKIP_WITHOUT_GPU();
  std::mt19937 rng(50);
  const quant::KvScheme k8v3 = turbo_format(8, 3, 128, true), k4v2 = turbo_format(4, 2, 128, false);
  for (const Case& c : {Case{k8v3, 2, 4, 64}, Case{k4v2, 2, 8, 16}}) {
    const Problem pr = make_problem(c, {700, 4100, 1, 9000}, rng);
    const HostPagedCache& h = pr.cache;
    const int n_seqs = (int)h.seq_lens.size(), d = h.format.head_dim;
    DevicePagedCache dev;
    DeviceBuffer<uint16_t> dq, out_ref(pr.q.size()), out_a(pr.q.size()), out_b(pr.q.size());
    dq.upload(pr.q);
    std::normal_distribution<float> n01;
    std::vector<float> kn((size_t)n_seqs * h.n_kv_heads * d), vn(kn.size());
    for (size_t i = 0; i < kn.size(); ++i) kn[i] = n01(rng), vn[i] = n01(rng);
    std::vector<int32_t> slots(n_seqs);
    for (int s = 0; s < n_seqs; ++s) {
      const int t = h.seq_lens[s] - 1;
      slots[s] = h.page_indices[h.page_indptr[s] + t / h.page_size] * h.page_size + t % h.page_size;
    }
    DeviceBuffer<float> dkn, dvn;
    DeviceBuffer<int32_t> dslots, ctr((size_t)n_seqs * pr.n_heads);
    dkn.upload(kn), dvn.upload(vn), dslots.upload(slots);
    ctr.fill_bytes(0);
    kernels::DecodeCudaParams p;
    p.n_seqs = n_seqs;
    p.n_heads = pr.n_heads;
    p.max_seq_len = *std::max_element(h.seq_lens.begin(), h.seq_lens.end());
    p.softmax_scale = 1.0f / std::sqrt((float)d);
    p.q = dq.get();
    p.merge_counters = ctr.get();
    DeviceBuffer<uint8_t> ws;
    kernels::KvEncodeCudaParams ep;
    ep.n_tokens = n_seqs, ep.k = dkn.get(), ep.v = dvn.get(), ep.slot_mapping = dslots.get();
    auto setup = [&] {  // a fresh copy of the cache (the encode overwrites the last rows)
      dev.upload(h);
      p.kv = dev.view(h);
      ep.cache = p.kv;
      ws.resize(kernels::decode_workspace_bytes(p));
      p.workspace = ws.get(), p.workspace_bytes = (int64_t)ws.size();
    };
    setup();
    ASSERT_TRUE(kernels::decode_uses_tensor_cores(p));
    ASSERT_TRUE(kernels::kvcodec_encode_cuda(ep).ok());
    TKV_CUDA_CHECK(cudaDeviceSynchronize());
    p.out = out_ref.get();
    ASSERT_TRUE(kernels::decode_attention_cuda(p).ok());
    TKV_CUDA_CHECK(cudaDeviceSynchronize());
    setup();
    out_a.fill_bytes(0xff), out_b.fill_bytes(0xff);
    p.programmatic_launch = true;
    ASSERT_TRUE(kernels::kvcodec_encode_cuda(ep).ok());
    p.out = out_a.get();
    ASSERT_TRUE(kernels::decode_attention_cuda(p).ok());
    p.out = out_b.get();
    ASSERT_TRUE(kernels::decode_attention_cuda(p).ok());
    TKV_CUDA_CHECK(cudaDeviceSynchronize());
    const std::vector<uint16_t> ref = out_ref.download();
    const std::string name = format_name(c.f) + "/ps" + std::to_string(c.page_size);
    EXPECT_EQ(std::memcmp(ref.data(), out_a.download().data(), ref.size() * 2), 0)
        << name << ": PDL after encode";
    EXPECT_EQ(std::memcmp(ref.data(), out_b.download().data(), ref.size() * 2), 0)
        << name << ": PDL after PDL";
    const std::vector<int32_t> left = ctr.download();
    EXPECT_EQ(std::count(left.begin(), left.end(), 0), (std::ptrdiff_t)left.size())
        << name << ": counters";
    // The new rows changed the output (else the test could not see a decode that ran early).
    setup();
    p.programmatic_launch = false;
    p.out = out_a.get();
    ASSERT_TRUE(kernels::decode_attention_cuda(p).ok());
    TKV_CUDA_CHECK(cudaDeviceSynchronize());
    const std::vector<uint16_t> before = out_a.download();
    EXPECT_NE(std::memcmp(ref.data(), before.data(), ref.size() * 2), 0)
        << name << ": encode had no effect";
  }
}

TEST(AttentionCuda, RejectsBadParams) {
  TKV_SKIP_WITHOUT_GPU();
  kernels::DecodeCudaParams p;
  p.kv.format.scheme.head_dim = 96;
  const Status st = kernels::decode_attention_cuda(p);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("[attention_cuda] head_dim 96"), std::string::npos) << st.message();
  kernels::DecodeCudaParams b;  // a block table too short for max_seq_len
  b.kv.format.n_kv_heads = 1, b.n_heads = 4, b.kv.format.page_size = 16, b.n_seqs = 1,
  b.max_seq_len = 100, b.kv.page_stride = 2;
  const Status sb = kernels::decode_attention_cuda(b);
  EXPECT_NE(
      sb.message().find("block table of 2 pages per sequence holds fewer than max_seq_len 100"),
      std::string::npos)
      << sb.message();
}

}  // namespace
}  // namespace tkv::testing
