// CUDA prefill attention (prefill_attention_cuda) = the decode kernel run once per query
// token (each token its own "sequence" of position + 1 keys over its sequence's pages,
// the way the whole-model forward ran prefill before), for bf16 and the turbo widths
// (every unpack width of K and V), head_dim 64/128/256, GQA 1/3/4/8: a ragged batch of
// chunks, one from position 0, one after a cached prefix, chunks that are not a multiple
// of the query tile, a one-token chunk. Gap rows between the chunks in q/out must stay
// unwritten; the CSR page table and a block table give the same bits, and so does a
// second call.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "base/status.h"
#include "kernels/attention_cuda/attention_cuda.h"
#include "kernels/attention_cuda/prefill_cuda.h"
#include "kernels/kvcodec/kvcodec.h"
#include "tests/cuda/cuda_test_util.h"

namespace tkv::testing {
namespace {

struct Chunk {
  int pos0 = 0, q_len = 0;  // the chunk's positions [pos0, pos0 + q_len) of its sequence
};

struct Problem {
  HostPagedCache cache;             // sequence s holds pos0 + q_len tokens
  std::vector<float> k_hat, v_hat;  // [rows, head_dim] dequantized (V un-rotated)
  std::vector<float> q;             // [rows_q, n_heads, head_dim], gaps included
  std::vector<int32_t> q_offsets;   // first row of each chunk in q
  std::vector<Chunk> chunks;
  int n_heads = 0, rows_q = 0;
};

constexpr int kGap = 2;  // rows of q/out before each chunk that belong to no chunk

Problem make_problem(const quant::KvScheme& f, int n_kv, int gqa, int page_size,
                     const std::vector<Chunk>& chunks, std::mt19937& rng) {
  Problem pr;
  const int d = f.head_dim;
  pr.n_heads = n_kv * gqa;
  pr.chunks = chunks;
  std::vector<int32_t> lens;
  for (const Chunk& c : chunks) lens.push_back(c.pos0 + c.q_len);
  pr.cache = make_paged_cache(f, n_kv, page_size, lens, rng);
  std::normal_distribution<float> n01(0.0f, 1.0f);
  fill_paged_cache(pr.cache, lens, rng, n01, &pr.k_hat, &pr.v_hat);
  for (const Chunk& c : chunks) {
    pr.q_offsets.push_back(pr.rows_q + kGap);
    pr.rows_q += kGap + c.q_len;
  }
  pr.q.resize((size_t)pr.rows_q * pr.n_heads * d);
  for (float& x : pr.q) x = n01(rng);
  return pr;
}

// The prefill kernel; out [rows_q, n_heads, head_dim] (gap rows as the poison left them).
std::vector<float> run_prefill(const Problem& pr, bool use_block_table) {
  const HostPagedCache& h = pr.cache;
  DevicePagedCache dev;
  dev.upload(h);
  DeviceBuffer<float> dq, dout(pr.q.size());
  dq.upload(pr.q);
  dout.fill_bytes(0xff);  // NaN: unwritten rows stay NaN
  std::vector<int32_t> q_lens;
  for (const Chunk& c : pr.chunks) q_lens.push_back(c.q_len);
  DeviceBuffer<int32_t> doff, dlen, dtab;
  doff.upload(pr.q_offsets);
  dlen.upload(q_lens);
  kernels::PrefillCudaParams p;
  p.kv = dev.view(h);
  if (use_block_table) {  // padded with pages far past the cache: a kernel reading one faults
    const std::vector<int32_t> table = block_table(h, 2, 1 << 28);
    dtab.upload(table);
    p.kv.page_stride = (int)(table.size() / h.seq_lens.size());
    p.kv.page_indices = dtab.get();
    p.kv.page_indptr = nullptr;
  }
  p.n_seqs = (int)pr.chunks.size();
  p.n_heads = pr.n_heads;
  p.max_q_len = *std::max_element(q_lens.begin(), q_lens.end());
  p.softmax_scale = 1.0f / std::sqrt((float)h.format.head_dim);
  p.q_offsets = doff.get();
  p.q_lens = dlen.get();
  p.q = dq.get();
  p.out = dout.get();
  const Status st = kernels::prefill_attention_cuda(p);
  EXPECT_TRUE(st.ok()) << st.to_string();
  TKV_CUDA_CHECK(cudaDeviceSynchronize());
  return dout.download();
}

// The decode kernel (general path, fp32 q/out) once per chunk token: out [tokens, heads, d]
// in chunk order.
std::vector<float> run_decode_per_token(const Problem& pr) {
  const HostPagedCache& h = pr.cache;
  const int d = h.format.head_dim;
  const size_t row_floats = (size_t)pr.n_heads * d;
  std::vector<int32_t> lens;
  std::vector<float> q;
  const std::vector<int32_t> seq_table = block_table(h, 0, 0);
  const size_t stride = seq_table.size() / h.seq_lens.size();
  std::vector<int32_t> table;
  for (size_t s = 0; s < pr.chunks.size(); ++s) {
    for (int j = 0; j < pr.chunks[s].q_len; ++j) {
      lens.push_back(pr.chunks[s].pos0 + j + 1);
      const float* src = pr.q.data() + (size_t)(pr.q_offsets[s] + j) * row_floats;
      q.insert(q.end(), src, src + row_floats);
      table.insert(table.end(), seq_table.begin() + s * stride,
                   seq_table.begin() + (s + 1) * stride);
    }
  }
  DevicePagedCache dev;
  dev.upload(h);
  DeviceBuffer<float> dq, dout(q.size());
  DeviceBuffer<int32_t> dlens, dtab;
  dq.upload(q);
  dlens.upload(lens);
  dtab.upload(table);
  kernels::DecodeCudaParams p;
  p.kv = dev.view(h);
  p.kv.page_stride = (int)stride;
  p.kv.page_indices = dtab.get();
  p.kv.page_indptr = nullptr;
  p.kv.seq_lens = dlens.get();
  p.n_seqs = (int)lens.size();
  p.n_heads = pr.n_heads;
  p.max_seq_len = *std::max_element(lens.begin(), lens.end());
  p.softmax_scale = 1.0f / std::sqrt((float)d);
  p.q_f32 = dq.get();
  p.out_f32 = dout.get();
  p.general_kernel = true;
  DeviceBuffer<uint8_t> ws(kernels::decode_workspace_bytes(p));
  p.workspace = ws.get();
  p.workspace_bytes = (int64_t)ws.size();
  const Status st = kernels::decode_attention_cuda(p);
  EXPECT_TRUE(st.ok()) << st.to_string();
  TKV_CUDA_CHECK(cudaDeviceSynchronize());
  return dout.download();
}

// |prefill - decode| <= 2 E + 2^-40: both compute the same fp32 attention in different
// summation orders, each within the decode test's derived bound (attention_cuda_test)
//   E = 8 eps vmax (2 sqrt(D) S + sqrt(T) + log2(D) sqrt(D) + 8),  eps = 2^-24,
// S = max_t scale sum_i |q_i k_i| over the query's keys (fp64 over the dequantized cache),
// vmax = max |v| over them, T their count. (Prefill also rounds K = (idx + zero) * scale per
// element where decode scales each 16-element sum: one more 2^-24 |q k| per term, inside the
// 2 sqrt(D) S term.) Returns the worst err/tol.
double compare(const Problem& pr, const std::vector<float>& pf, const std::vector<float>& dec,
               const std::string& what) {
  const HostPagedCache& h = pr.cache;
  const int d = h.format.head_dim, gqa = pr.n_heads / h.n_kv_heads;
  const double scale = 1.0 / std::sqrt((double)d), eps = std::ldexp(1.0, -24);
  const size_t row_floats = (size_t)pr.n_heads * d;
  double worst = 0.0;
  size_t tok = 0;
  for (size_t s = 0; s < pr.chunks.size(); ++s) {
    for (int j = 0; j < pr.chunks[s].q_len; ++j, ++tok) {
      const int T = pr.chunks[s].pos0 + j + 1;
      const size_t prow = (size_t)(pr.q_offsets[s] + j) * row_floats;
      for (int hq = 0; hq < pr.n_heads; ++hq) {
        const int kvh = hq / gqa;
        const float* qv = pr.q.data() + prow + (size_t)hq * d;
        double smax = 0.0, vmax = 0.0;
        for (int t = 0; t < T; ++t) {
          const int64_t row = h.row((int)s, t, kvh);
          double mag = 0.0;
          for (int i = 0; i < d; ++i) {
            mag += std::fabs((double)qv[i] * pr.k_hat[row * d + i]);
            vmax = std::max(vmax, (double)std::fabs(pr.v_hat[row * d + i]));
          }
          smax = std::max(smax, mag * scale);
        }
        const double E = 8 * eps * vmax *
                         (2 * std::sqrt((double)d) * smax + std::sqrt((double)T) +
                          std::log2((double)d) * std::sqrt((double)d) + 8);
        const double tol = 2 * E + std::ldexp(1.0, -40);
        for (int i = 0; i < d; ++i) {
          const float a = pf[prow + (size_t)hq * d + i],
                      b = dec[tok * row_floats + (size_t)hq * d + i];
          EXPECT_TRUE(std::isfinite(a)) << what << " unwritten/non-finite chunk " << s << " token "
                                        << j << " head " << hq << " i " << i;
          const double err = std::fabs((double)a - b);
          worst = std::max(worst, err / tol);
          if (!(err <= tol)) {
            ADD_FAILURE() << what << " chunk " << s << " token " << j << " (T=" << T << ") head "
                          << hq << " i " << i << ": prefill " << a << " decode " << b << " tol "
                          << tol;
            return worst;
          }
        }
      }
    }
  }
  std::printf("%-26s max err/tol %.3f\n", what.c_str(), worst);
  return worst;
}

// Pos0 0 (a 130-token chunk: not a multiple of any query tile), a chunk after a cached
// prefix of 333 tokens, a one-token chunk deep in its sequence.
const std::vector<Chunk> kChunks = {{0, 130}, {333, 67}, {1000, 1}};

void run_case(const quant::KvScheme& f, int n_kv, int gqa, int page_size, std::mt19937& rng,
              const std::vector<Chunk>& chunks = kChunks) {
  const Problem pr = make_problem(f, n_kv, gqa, page_size, chunks, rng);
  const std::string name = format_name(f) + "/gqa" + std::to_string(gqa) + "/kv" +
                           std::to_string(n_kv) + "/ps" + std::to_string(page_size);
  const std::vector<float> pf = run_prefill(pr, false);
  compare(pr, pf, run_decode_per_token(pr), name);
  // Gap rows: untouched (still the 0xff poison).
  const size_t row_floats = (size_t)pr.n_heads * f.head_dim;
  for (size_t s = 0; s < pr.chunks.size(); ++s)
    for (int g = 1; g <= kGap; ++g) {
      const size_t r = (size_t)(pr.q_offsets[s] - g) * row_floats;
      uint32_t bits = 0;
      std::memcpy(&bits, &pf[r], 4);
      ASSERT_EQ(bits, 0xffffffffu) << name << ": gap row before chunk " << s << " was written";
    }
  const std::vector<float> again = run_prefill(pr, false), bt = run_prefill(pr, true);
  ASSERT_EQ(std::memcmp(pf.data(), again.data(), pf.size() * 4), 0)
      << name << ": same input, different bits";
  ASSERT_EQ(std::memcmp(pf.data(), bt.data(), pf.size() * 4), 0)
      << name << ": block table differs from the CSR page table";
}

TEST(PrefillCuda, FormatsAndHeadDims) {
  TKV_SKIP_WITHOUT_GPU();
  std::mt19937 rng(52);
  const int gqas[] = {4, 3, 1, 8};
  int n = 0;
  for (int d : {128, 64, 256}) {
    for (const quant::KvScheme& f :
         {bf16_format(d), turbo_format(8, 3, d, true), turbo_format(8, 4, d, true),
          turbo_format(4, 3, d, false), turbo_format(2, 2, d, false), turbo_format(8, 3, d, false),
          turbo_format(5, 1, d, false), turbo_format(3, 5, d, false),
          turbo_format(8, 8, d, true)}) {
      run_case(f, 2, gqas[n++ % 4], 16, rng);
      if (HasFatalFailure()) return;
    }
  }
}

TEST(PrefillCuda, GqaRatiosAndPageSizes) {
  TKV_SKIP_WITHOUT_GPU();
  std::mt19937 rng(53);
  for (int gqa : {1, 3, 4, 8}) {
    for (const quant::KvScheme& f : {turbo_format(8, 3, 128, true), bf16_format(128)}) {
      run_case(f, 2, gqa, 16, rng);
      if (HasFatalFailure()) return;
    }
  }
  // SmolLM2's shape (d 64, 9 heads over 3 kv heads), pages of 8 and 64 tokens.
  run_case(turbo_format(4, 3, 64, false), 3, 3, 8, rng);
  run_case(bf16_format(64), 3, 3, 64, rng);
  // A long chunk after a long prefix: many key tiles, many query tiles.
  run_case(turbo_format(8, 4, 128, true), 1, 4, 16, rng, {{1500, 700}, {0, 37}});
}

TEST(PrefillCuda, RefusesWhatItCannotRun) {
  kernels::PrefillCudaParams p;
  p.kv.format = {turbo_format(8, 3, 512, true), 2, 16};
  p.n_heads = 8;
  EXPECT_FALSE(kernels::prefill_cuda_supports(p.kv.format, 8));  // head_dim 512
  p.kv.format = {turbo_format(8, 3, 128, true), 1, 16};
  EXPECT_FALSE(kernels::prefill_cuda_supports(p.kv.format, 65));  // GQA 65 > 64 rows
  EXPECT_TRUE(kernels::prefill_cuda_supports(p.kv.format, 64));
  p.n_heads = 4;
  p.n_seqs = 1;
  p.max_q_len = 4;
  const Status st = kernels::prefill_attention_cuda(p);  // null pointers: refused, no launch
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("[attention_cuda] prefill"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace tkv::testing
