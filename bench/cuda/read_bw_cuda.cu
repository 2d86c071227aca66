// tkv_read_bw: how fast can an H200 read DRAM, by access pattern? (docs/bench/cuda.md)
// The decode kernel's loop streams at ~4.33 TB/s when it only loads, while PyTorch SDPA
// reads dense bf16 K/V at up to 4.7 TB/s. This times pure-load kernels, each call after
// a 256 MB read flush (as tkv_cuda_bench), median of 20, and prints one line per case:
//   ldg    grid-stride 16-byte loads, U in flight per thread, G blocks of 256 per SM
//   bulk   1-D cp.async.bulk into an S-stage ring of C-byte chunks, one issuing lane per
//          block, contiguous slab per block, N blocks per SM
//   paged  the decode kernel's pattern: blocks (seq, kv head, partition), page 16 with
//          pages shuffled, per page one bulk copy per plane (k8v3: 2048 + 768 + 3 x 128 B)
//          into 256-token stages, W issuing warps; "fused" = the 5 planes of a
//          (page, kv head) contiguous (one 3200-byte copy per page)
// Sizes: the k8v3 bytes of B=8 x 32k (419 MB) and B=1 x 128k (210 MB) and 8 x 128k.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "bench/cuda/fill_cuda.h"
#include "bench/cuda/timing_cuda.h"
#include "device/cuda_check.h"
#include "kernels/attention_cuda/decode_common.cuh"

using namespace tkv::kernels::cuda_detail;
using tkv::bench::median_us;

namespace {

template <int U>
__global__ void __launch_bounds__(256) ldg_kernel(const uint4* p, int64_t n, uint32_t* sink) {
  uint32_t x = 0;
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  for (; i + (U - 1) * stride < n; i += U * stride) {
    uint4 v[U];
#pragma unroll
    for (int k = 0; k < U; ++k) v[k] = __ldcs(p + i + k * stride);
#pragma unroll
    for (int k = 0; k < U; ++k) x ^= v[k].x ^ v[k].y ^ v[k].z ^ v[k].w;
  }
  for (; i < n; i += stride) x ^= __ldcs(p + i).x;
  if (x == 0x9e3779b9u) *sink = x;
}

// Each block streams bytes_per_block from base + block * bytes_per_block in chunks of c
// through `stages` ring slots; lane t (< lanes, stages % lanes == 0) issues chunks i = t mod lanes.
__global__ void bulk_kernel(const uint8_t* base, int64_t bytes_per_block, int c, int stages,
                            int lanes, uint32_t* sink) {
  extern __shared__ __align__(1024) uint8_t ring[];
  __shared__ uint64_t full[128];
  const uint8_t* src = base + blockIdx.x * bytes_per_block;
  const int n = (int)(bytes_per_block / c), t = threadIdx.x;
  if (t == 0) {
    for (int s = 0; s < stages; ++s) mbar_init(&full[s], 1);
    mbar_init_fence();
  }
  __syncthreads();
  if (t >= lanes) return;
  for (int s = t; s < stages && s < n; s += lanes) {
    mbar_arrive_expect_tx(&full[s], c);
    bulk_load(ring + (int64_t)s * c, src + (int64_t)s * c, c, &full[s]);
  }
  for (int i = t; i < n; i += lanes) {
    const int s = i % stages;
    mbar_wait(&full[s], (i / stages) & 1);
    if (i + stages < n) {
      mbar_arrive_expect_tx(&full[s], c);
      bulk_load(ring + (int64_t)s * c, src + (int64_t)(i + stages) * c, c, &full[s]);
    }
  }
  if (ring[0] == 0x5a && ring[c - 1] == 0xa5 && n < 0) *sink = 1;
}

struct Planes {
  const uint8_t* p[5];
  int row[5];      // bytes per (token, kv head) of each copy
  int64_t blk[5];  // bytes between consecutive (page, kv head) blocks of its plane
  int n = 5;       // copies per (page, kv head)
};

// One block per (partition, kv head, seq). The partition's page indices go to shared
// memory first; then each stage of 256 tokens (256 / page slots) is issued by one lane per
// slot (slot j: warp j % W, lane j / W), each copying its page's planes and arriving with
// its bytes on the stage's mbarrier; a lane re-issues a stage when its previous use landed.
__global__ void paged_kernel(Planes pl, const int32_t* pages, int pages_per_seq, int n_kv, int page,
                             int part_pages, int stages, uint32_t* sink) {
  extern __shared__ __align__(1024) uint8_t ring[];
  __shared__ uint64_t full[8];
  const int nw = blockDim.x / 32, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int h = blockIdx.y, seq = blockIdx.z, p0 = blockIdx.x * part_pages;
  const int np = min(part_pages, pages_per_seq - p0);
  const int slots = 256 / page, stage_pages = slots;
  int slot_bytes = 0;
  for (int q = 0; q < pl.n; ++q) slot_bytes += page * pl.row[q];
  const int stage_bytes = slots * slot_bytes;
  int32_t* spt = reinterpret_cast<int32_t*>(ring + (int64_t)stages * stage_bytes);
  const int32_t* pt = pages + (int64_t)seq * pages_per_seq + p0;
  for (int i = threadIdx.x; i < np; i += blockDim.x) spt[i] = __ldg(pt + i);
  if (threadIdx.x == 0) {
    for (int s = 0; s < stages; ++s) mbar_init(&full[s], slots);
    mbar_init_fence();
  }
  __syncthreads();
  const int slot = lane * nw + warp;
  if (slot >= slots) return;
  const int n_stages = (np + stage_pages - 1) / stage_pages;
  auto issue = [&](int i) {
    const int s = i % stages, j = i * stage_pages + slot;
    uint64_t* bar = &full[s];
    if (j >= np) {
      mbar_arrive(bar);
      return;
    }
    mbar_arrive_expect_tx(bar, slot_bytes);
    const int64_t b = (int64_t)spt[j] * n_kv + h;
    uint8_t* d = ring + (int64_t)s * stage_bytes + slot * slot_bytes;
    for (int q = 0; q < pl.n; ++q) {
      bulk_load(d, pl.p[q] + b * pl.blk[q], page * pl.row[q], bar);
      d += page * pl.row[q];
    }
  };
  for (int i = 0; i < stages && i < n_stages; ++i) issue(i);
  for (int i = 0; i < n_stages; ++i) {
    mbar_wait(&full[i % stages], (i / stages) & 1);
    if (i + stages < n_stages) issue(i + stages);
  }
  if (ring[0] == 0x5a && np < 0) *sink = 1;
}

void report(const char* what, const std::string& cfg, int64_t bytes, double us) {
  std::printf("%-6s %-44s %8.1f MB %9.2f us %7.0f GB/s\n", what, cfg.c_str(), bytes / 1e6, us,
              bytes / us / 1e3);
  std::fflush(stdout);
}

}  // namespace

int main() {
  int sms = 0;
  TKV_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  uint32_t* sink = nullptr;  // the kernels' never-taken store
  TKV_CUDA_CHECK(cudaMalloc(&sink, 16));
  const int64_t big = int64_t(1) << 31;
  uint8_t* buf = nullptr;
  TKV_CUDA_CHECK(cudaMalloc(&buf, big + 4096));
  TKV_CUDA_CHECK(tkv::bench::fill_random_bytes(buf, big, 1));
  const int n_kv = 8, row_total = 200;  // k8v3 row bytes per (token, kv head)
  const int64_t sizes[] = {int64_t(1) * 131072 * n_kv * row_total,
                           int64_t(8) * 32768 * n_kv * row_total,
                           int64_t(8) * 131072 * n_kv * row_total};

  const char* only = std::getenv("TKV_RBW_ONLY");  // ldg | bulk | paged: one family
  auto want = [&](const char* f) { return !only || !std::strcmp(only, f); };
  // ldg: G blocks of 256 per SM, U loads in flight per thread.
  for (int64_t sz : sizes)
    if (want("ldg"))
      for (int g : {4, 8})
        for (int u : {1, 4, 8}) {
          const int64_t n = sz / 16;
          auto fn = [&] {
            const int grid = sms * g;
            if (u == 1) ldg_kernel<1><<<grid, 256>>>(reinterpret_cast<const uint4*>(buf), n, sink);
            if (u == 4) ldg_kernel<4><<<grid, 256>>>(reinterpret_cast<const uint4*>(buf), n, sink);
            if (u == 8) ldg_kernel<8><<<grid, 256>>>(reinterpret_cast<const uint4*>(buf), n, sink);
          };
          report("ldg", "G=" + std::to_string(g) + " U=" + std::to_string(u), sz,
                 median_us(fn, 20));
        }

  // bulk: N blocks per SM, chunk c, stages s, issuing lanes (in flight per SM = N * s * c).
  TKV_CUDA_CHECK(
      cudaFuncSetAttribute(bulk_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024));
  struct BulkCfg {
    int nb, c, s, lanes, grid = 0;
  };  // grid 0: N blocks on every SM
  const BulkCfg bc[] = {
      {1, 16384, 8, 1},      {1, 1024, 64, 1},      {1, 1024, 128, 1},    {1, 1024, 128, 16},
      {1, 2048, 64, 1},      {1, 2048, 64, 16},     {1, 4096, 16, 1},     {1, 4096, 32, 1},
      {1, 4096, 32, 16},     {1, 8192, 16, 1},      {1, 8192, 16, 16},    {2, 4096, 16, 16},
      {1, 16384, 8, 1, 128}, {1, 16384, 8, 1, 120}, {1, 16384, 8, 1, 96}, {1, 16384, 12, 1, 128}};
  for (int64_t sz : sizes)
    for (const BulkCfg& b : bc) {
      if (!want("bulk")) break;
      const int grid = b.grid ? b.grid : sms * b.nb;
      int64_t per = sz / grid / b.c * b.c;
      auto fn = [&] { bulk_kernel<<<grid, 32, b.c * b.s>>>(buf, per, b.c, b.s, b.lanes, sink); };
      char cfg[96];
      std::snprintf(cfg, sizeof cfg, "N=%d C=%d S=%d lanes=%d inflight/SM=%dK grid=%d", b.nb, b.c,
                    b.s, b.lanes, b.nb * b.c * b.s / 1024, grid);
      report("bulk", cfg, per * grid, median_us(fn, 20));
    }

  // paged: the decode pattern over k8v3 planes in buf (rows 128, 48, 8, 8, 8 B per token):
  // "planes" = five dense planes (today's layout, 5 copies per page), "fused3" = one block per
  // (page, kv head) holding K | V | the 3 scale runs (3 copies), "fused1" = the same, 1 copy.
  TKV_CUDA_CHECK(
      cudaFuncSetAttribute(paged_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 231424));
  struct Shape {
    int batch, ctx, parts;
  };
  const Shape shapes[] = {{1, 131072, 16}, {8, 32768, 2}, {8, 131072, 2}};
  const int rows[5] = {128, 48, 8, 8, 8};
  for (const Shape& sh : shapes)
    for (int pg : {16, 64}) {
      if (!want("paged")) break;
      const int pages_per_seq = sh.ctx / pg;
      const int64_t n_pages = (int64_t)sh.batch * pages_per_seq;
      std::vector<int32_t> pt(n_pages);
      std::iota(pt.begin(), pt.end(), 0);
      std::mt19937 rng(7);
      std::shuffle(pt.begin(), pt.end(), rng);
      int32_t* dpt = nullptr;
      TKV_CUDA_CHECK(cudaMalloc(&dpt, n_pages * 4));
      TKV_CUDA_CHECK(cudaMemcpy(dpt, pt.data(), n_pages * 4, cudaMemcpyHostToDevice));
      const int64_t bytes = n_pages * n_kv * pg * row_total;
      const int part_pages = pages_per_seq / sh.parts;
      for (const char* lay : {"planes", "fused3", "fused1"}) {
        Planes pl;
        if (!std::strcmp(lay, "fused1")) {
          pl.n = 1, pl.p[0] = buf, pl.row[0] = row_total, pl.blk[0] = pg * row_total;
        } else if (!std::strcmp(lay, "fused3")) {
          const int r3[3] = {128, 48, 24};
          int off = 0;
          pl.n = 3;
          for (int q = 0; q < 3; ++q)
            pl.row[q] = r3[q], pl.p[q] = buf + off * pg, pl.blk[q] = pg * row_total, off += r3[q];
        } else {
          int64_t off = 0;
          for (int q = 0; q < 5; ++q) {
            pl.row[q] = rows[q], pl.p[q] = buf + off, pl.blk[q] = pg * rows[q];
            off = (off + n_pages * n_kv * pg * rows[q] + 4095) / 4096 * 4096;
          }
        }
        for (int w : {4, 16}) {
          if (w > 256 / pg) continue;
          for (int stages : {3, 4}) {
            const int smem = stages * 256 * row_total + part_pages * 4;
            const dim3 grid(sh.parts, n_kv, sh.batch);
            auto fn = [&] {
              paged_kernel<<<grid, 32 * w, smem>>>(pl, dpt, pages_per_seq, n_kv, pg, part_pages,
                                                   stages, sink);
            };
            char cfg[96];
            std::snprintf(cfg, sizeof cfg, "B=%d ctx=%d P=%d page=%d %s W=%d S=%d", sh.batch,
                          sh.ctx, sh.parts, pg, lay, w, stages);
            report("paged", cfg, bytes, median_us(fn, 20));
          }
        }
      }
      TKV_CUDA_CHECK(cudaFree(dpt));
    }
  // Launch + ramp floor: the bulk kernel (N=1, C=16K, S=8) over tiny slabs.
  for (int64_t per : {int64_t(16384), int64_t(131072), int64_t(1) << 20}) {
    auto fn = [&] { bulk_kernel<<<sms, 32, 16384 * 8>>>(buf, per, 16384, 8, 1, sink); };
    report("floor", "N=1 C=16K S=8 per-block=" + std::to_string(per / 1024) + "K", per * sms,
           median_us(fn, 20));
  }
  return 0;
}
