// CUDA KV encode (kvcodec_encode_cuda) is bit-exact: every byte of every plane
// equals the CPU reference kvcodec_encode_ref, for every turbo width, head_dim
// and bf16, on random data with edge rows (constant groups, NaN/Inf, -0, tiny,
// wide range), through a shuffled slot mapping with skipped (-1) tokens; rows no
// token maps to keep their poison. Also the tests/data/goldens vectors, field by field.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <string>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "kernels/kvcodec/kvcodec.h"
#include "kernels/kvcodec/kvcodec_cuda.h"
#include "tests/cuda/cuda_test_util.h"

namespace tkv::testing {
namespace {

// Fills one [head_dim] row; kind picks the distribution (edges included).
void fill_row(float* x, int d, int kind, std::mt19937& rng) {
  std::normal_distribution<float> n01(0.0f, 1.0f);
  for (int i = 0; i < d; ++i) x[i] = n01(rng);
  switch (kind % 8) {
    case 1:
      for (int i = 0; i < d; ++i) x[i] = 7.0f + 0.01f * x[i];
      break;  // mean offset
    case 2:
      for (int i = 0; i < 32; ++i) x[i] = 0.25f;
      break;  // constant group
    case 3:
      for (int i = 0; i < d; ++i) x[i] *= 1e-6f;
      break;  // subnormal scales
    case 4:
      x[3] = std::numeric_limits<float>::quiet_NaN(), x[40 % d] = INFINITY, x[7] = -INFINITY;
      break;
    case 5:
      for (int i = 0; i < d; ++i) x[i] *= (i % 9 == 0) ? 3000.0f : 1.0f;
      break;  // outlier channels
    case 6:
      for (int i = 0; i < d; ++i) x[i] = (i % 2) ? -0.0f : 0.0f;
      break;  // all (signed) zero
    case 7:
      for (int i = 0; i < d; ++i) x[i] *= 1e5f;
      break;  // past fp16 range
    default:
      break;
  }
}

// Encodes n_tokens random tokens on the GPU and with the reference; compares planes.
// with_k / with_v false: that input null, its planes must keep the poison everywhere.
void check_format(const quant::KvScheme& f, std::mt19937& rng, int page_size = 16,
                  bool with_k = true, bool with_v = true) {
  const int n_kv = 3, n_tokens = 45, d = f.head_dim;
  HostPagedCache h = make_paged_cache(f, n_kv, page_size, {n_tokens + 20}, rng);
  const int64_t rows = h.n_rows();
  // Slots: a random subset of the cache's slots, one token skipped (-1).
  std::vector<int32_t> slots(h.n_pages * page_size);
  std::iota(slots.begin(), slots.end(), 0);
  std::shuffle(slots.begin(), slots.end(), rng);
  slots.resize(n_tokens);
  slots[5] = -1;
  std::vector<float> k((size_t)n_tokens * n_kv * d), v(k.size());
  for (int r = 0; r < n_tokens * n_kv; ++r) {
    fill_row(&k[(size_t)r * d], d, r, rng);
    fill_row(&v[(size_t)r * d], d, r + 3, rng);
  }
  // Reference over cache rows: input row h.slot_row(slot, h) (head-major pages) = token's row for
  // h.
  std::vector<float> k_rows((size_t)rows * d, 0.0f), v_rows(k_rows.size(), 0.0f);
  for (int t = 0; t < n_tokens; ++t) {
    for (int hh = 0; slots[t] >= 0 && hh < n_kv; ++hh) {
      std::copy_n(&k[((size_t)t * n_kv + hh) * d], d,
                  &k_rows[(size_t)h.slot_row(slots[t], hh) * d]);
      std::copy_n(&v[((size_t)t * n_kv + hh) * d], d,
                  &v_rows[(size_t)h.slot_row(slots[t], hh) * d]);
    }
  }
  HostPagedCache ref = h;
  const quant::KvScheme scheme = f;
  const quant::KvRowLayout layout = quant::kv_row_layout(scheme);
  ASSERT_EQ(layout.k_data_bytes, quant::kv_row_layout_of(f).k_data_bytes);
  ASSERT_EQ(layout.v_data_bytes, quant::kv_row_layout_of(f).v_data_bytes);
  kernels::KvEncodeParams ep;
  ep.scheme = scheme;
  ep.n_rows = rows;
  ep.k = k_rows.data();
  ep.v = v_rows.data();
  ep.out =
      kernels::kv_planes_separate(layout, ref.k_data.data(), ref.v_data.data(), ref.k_scale.data(),
                                  ref.k_zero.data(), ref.v_scale.data(), nullptr);
  kernels::kvcodec_encode_ref(ep);

  DevicePagedCache dev;
  dev.upload(h);
  for (auto* b : {&dev.k_data, &dev.v_data})
    b->fill_bytes(0xa5);  // poison: unmapped rows must keep it
  for (auto* b : {&dev.k_scale, &dev.k_zero, &dev.v_scale}) b->fill_bytes(0xa5);
  DeviceBuffer<float> dk, dv;
  DeviceBuffer<int32_t> dslots;
  dk.upload(k);
  dv.upload(v);
  dslots.upload(slots);
  kernels::KvEncodeCudaParams p;
  p.cache = dev.view(h);
  p.n_tokens = n_tokens;
  p.k = with_k ? dk.get() : nullptr;
  p.v = with_v ? dv.get() : nullptr;
  p.slot_mapping = dslots.get();
  const Status st = kernels::kvcodec_encode_cuda(p);
  ASSERT_TRUE(st.ok()) << st.to_string();
  TKV_CUDA_CHECK(cudaDeviceSynchronize());

  std::vector<bool> mapped(rows, false);
  for (int t = 0; t < n_tokens; ++t) {
    for (int hh = 0; slots[t] >= 0 && hh < n_kv; ++hh) mapped[h.slot_row(slots[t], hh)] = true;
  }
  auto compare = [&](const auto& got, const auto& want, int per_row, const char* plane,
                     bool written = true) {
    for (int64_t r = 0; r < rows; ++r) {
      for (int i = 0; i < per_row; ++i) {
        const size_t at = (size_t)r * per_row + i;
        const uint32_t poison = sizeof(got[0]) == 1 ? 0xa5u : 0xa5a5u;
        const uint32_t w = mapped[r] && written ? (uint32_t)want[at] : poison;
        ASSERT_EQ((uint32_t)got[at], w) << format_name(f) << " plane " << plane << " row " << r
                                        << (mapped[r] ? "" : " (unmapped)") << " elem " << i;
      }
    }
  };
  compare(dev.k_data.download(), ref.k_data, quant::kv_row_layout_of(f).k_data_bytes, "k_data",
          with_k);
  compare(dev.v_data.download(), ref.v_data, quant::kv_row_layout_of(f).v_data_bytes, "v_data",
          with_v);
  if (!f.is_float()) {
    compare(dev.k_scale.download(), ref.k_scale, (f.head_dim / quant::kTurboGroup), "k_scale",
            with_k);
    compare(dev.k_zero.download(), ref.k_zero, (f.head_dim / quant::kTurboGroup), "k_zero", with_k);
    compare(dev.v_scale.download(), ref.v_scale, (f.head_dim / quant::kTurboGroup), "v_scale",
            with_v);
  }
}

std::vector<quant::KvScheme> all_formats(int d) {
  std::vector<quant::KvScheme> out;
  for (int kb : {8, 5, 4, 3, 2}) {
    for (int vb : {1, 2, 3, 4, 5, 8}) out.push_back(turbo_format(kb, vb, d, true));
  }
  for (int vb : {3, 4}) out.push_back(turbo_format(8, vb, d, false));  // unsigned 8-bit keys
  for (int vb : {1, 2, 3, 4, 5, 8}) {  // the MSE-fitted V scale: the per-lane search == the CPU's
    quant::KvScheme f = turbo_format(4, vb, d, true);
    f.v_mse_scale = true;
    out.push_back(f);
  }
  out.push_back(bf16_format(d));
  return out;
}

TEST(KvcodecCuda, EncodeBitExactWithReferenceOnRandomData) {
  TKV_SKIP_WITHOUT_GPU();
  std::mt19937 rng(1234);
  for (int d : {64, 128, 256, 512}) {
    for (const quant::KvScheme& f : all_formats(d)) {
      SCOPED_TRACE(format_name(f));
      check_format(f, rng);
      if (HasFatalFailure()) return;
    }
  }
}

// K only and V only (the other input null): the present planes as the reference, the
// other planes untouched (the kernel's K and V halves run independently).
TEST(KvcodecCuda, EncodeKOnlyAndVOnly) {
  TKV_SKIP_WITHOUT_GPU();
  std::mt19937 rng(7);
  for (const quant::KvScheme& f : {turbo_format(8, 3, 128, true), turbo_format(4, 8, 64, true),
                                   turbo_format(3, 2, 512, true), bf16_format(128)}) {
    for (const bool k_only : {true, false}) {
      SCOPED_TRACE(format_name(f) + (k_only ? "/k only" : "/v only"));
      check_format(f, rng, 16, k_only, !k_only);
      if (HasFatalFailure()) return;
    }
  }
}

// Head-major pages of other sizes (the row of a slot depends on page_size).
TEST(KvcodecCuda, EncodePageSizes) {
  TKV_SKIP_WITHOUT_GPU();
  std::mt19937 rng(99);
  for (int ps : {1, 8, 32, 64}) {
    for (const quant::KvScheme& f : {turbo_format(8, 3, 128, true), bf16_format(64)}) {
      SCOPED_TRACE(format_name(f) + "/ps" + std::to_string(ps));
      check_format(f, rng, ps);
      if (HasFatalFailure()) return;
    }
  }
}

// The goldens (independent implementation of the spec) through the GPU encoder.
TEST(KvcodecCuda, EncodeMatchesGoldens) {
  TKV_SKIP_WITHOUT_GPU();
  // $TKV_GOLDENS_DIR overrides the source tree's copy (a GPU machine may get the binary alone).
  const char* env = std::getenv("TKV_GOLDENS_DIR");
  const std::string path =
      std::string(env ? env : TKV_SOURCE_DIR "/tests/data/goldens") + "/turboquant_vectors.json";
  std::ifstream in(path);
  ASSERT_TRUE(in.good()) << "missing " << path;
  const nlohmann::json j = nlohmann::json::parse(in);
  int checked = 0;
  for (const auto& vec : j["vectors"]) {
    const int d = vec["head_dim"].get<int>();
    std::vector<float> x;
    for (const auto& e : vec["input"]) x.push_back((float)e.get<double>());
    for (const auto& [kname, kg] : vec["k"].items()) {
      const int kb = std::stoi(kname.substr(1));
      const bool sgn = kb != 8 || kname == "k8s";
      for (const auto& [vname, vg] : vec["v"].items()) {
        if (kname != "k8s" && vname != "v3") continue;  // every K with v3, every V with k8s
        const quant::KvScheme f = turbo_format(kb, std::stoi(vname.substr(1)), d, sgn);
        std::mt19937 rng(7);
        HostPagedCache h = make_paged_cache(f, 1, 16, {1}, rng);
        DevicePagedCache dev;
        dev.upload(h);
        DeviceBuffer<float> dx;
        dx.upload(x);
        const int32_t slot = h.page_indices[0] * 16;
        DeviceBuffer<int32_t> ds;
        ds.upload({slot});
        kernels::KvEncodeCudaParams p;
        p.cache = dev.view(h);
        p.n_tokens = 1;
        p.k = dx.get();
        p.v = dx.get();
        p.slot_mapping = ds.get();
        ASSERT_TRUE(kernels::kvcodec_encode_cuda(p).ok());
        const auto kd = dev.k_data.download(), vd = dev.v_data.download();
        const auto ks = dev.k_scale.download(), kz = dev.k_zero.download(),
                   vs = dev.v_scale.download();
        const int64_t row = h.slot_row(slot, 0);
        for (int i = 0; i < quant::kv_row_layout_of(f).k_data_bytes; ++i)
          ASSERT_EQ(kd[row * quant::kv_row_layout_of(f).k_data_bytes + i],
                    kg["packed_u8"][i].get<int>())
              << kname << " d" << d << " byte " << i;
        for (int i = 0; i < quant::kv_row_layout_of(f).v_data_bytes; ++i)
          ASSERT_EQ(vd[row * quant::kv_row_layout_of(f).v_data_bytes + i],
                    vg["packed_u8"][i].get<int>())
              << vname << " d" << d << " byte " << i;
        for (int g = 0; g < d / 32; ++g) {
          ASSERT_EQ(f16_to_f32(ks[row * (d / 32) + g]), (float)kg["scale_fp16"][g].get<double>())
              << kname << " g" << g;
          ASSERT_EQ(f16_to_f32(kz[row * (d / 32) + g]), (float)kg["zero_fp16"][g].get<double>())
              << kname << " g" << g;
          ASSERT_EQ(f16_to_f32(vs[row * (d / 32) + g]), (float)vg["scale_fp16"][g].get<double>())
              << vname << " g" << g;
        }
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 100) << "golden cases checked";
  std::printf("golden (k, v) encodes checked bit-exact on the GPU: %d\n", checked);
}

}  // namespace
}  // namespace tkv::testing
