// CUDA decode GEMV over GGUF-quantized weights: y[t, o] = sum_i W[o, i] * x[t, i] for
// 1..16 tokens, reading the weight blocks as stored (no dequantized copy). Weights stream
// through shared memory in 16-byte cp.async chunks (whole sectors, any block size); x stays
// in registers: int8 per 32-element unit (q8_1-style, integer dot products) for quantized
// weights, fp32 for float weights. Plain C++17 (nvcc includes it); the reference is
// matmul_ref.
// Design and measured speed: docs/bench/cuda.md ("Decode GEMV").
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "quant/ggml_types.h"

namespace tkv {
class Status;  // base/status.h (not includable from .cu files)
}

namespace tkv::kernels {

struct GemvCudaParams {
  const void* w = nullptr;  // [n_out, n_in] in `type` blocks, device, 16-byte aligned
  ggml::Type type = ggml::Type::kF32;
  int64_t n_in = 0;          // a multiple of the type's block elements
  int64_t n_out = 0;         // rows
  int n_tokens = 1;          // 1..kGemvMaxTokens
  const float* x = nullptr;  // [n_tokens, n_in] device
  float* y = nullptr;        // [n_tokens, n_out] device
  int sm_count = 132;        // multiprocessors, for the grid size
  int stage_bytes = 0;       // weight bytes per shared-memory stage (whole rows); 0 = default
  // Which kernel: kAuto picks (the benchmark and the tests name one to compare them).
  enum class Variant { kAuto, kBlock, kWarp } variant = Variant::kAuto;
  // Programmatic dependent launch (warp kernel): the call may start while the previous kernel
  // on the stream drains; it issues its first weight copies, then waits for that kernel
  // (griddepcontrol.wait) before it reads x. Safe whatever the previous kernel is.
  bool pdl = false;
  // Optional split output, for projections fused into one matrix (Q|K|V, gate|up): rows
  // [split1, split2) go to y1 as [n_tokens, split2 - split1] and rows [split2, n_out) to y2
  // as [n_tokens, n_out - split2]; y keeps [n_tokens, split1]. 0 = no split there.
  int64_t split1 = 0, split2 = 0;
  float* y1 = nullptr;
  float* y2 = nullptr;
};

constexpr int kGemvMaxTokens = 16;

// True when gemv_cuda has a kernel for this weight type: Q4_0, Q4_1, Q5_0, Q8_0, Q4_K,
// Q5_K, Q6_K, F16, BF16, F32.
bool gemv_cuda_supports(ggml::Type type);

// Validates p ("[matmul_cuda] ..."), then launches on stream. Asynchronous: the error of
// the launch is returned, not of the execution. Error model (tests/cuda/matmul_cuda_test.cc):
// float weights: fp32 sums of w * x in an unspecified order; quantized weights: x rounded
// to int8 per 32 elements (|error| <= amax / 254), exact integer dots, fp32 scaling and
// sums; a format's min term (Q4_1, Q4_K, Q5_K) uses the unrounded fp32 sum of x.
Status gemv_cuda(const GemvCudaParams& p, cudaStream_t stream = nullptr);

namespace cuda_detail {
// Units x tokens of x a thread holds in registers: int8 (12 registers each) for quantized
// weights, fp32 (32 each) for float weights.
constexpr int kGemvQuantXUnits = 8, kGemvFloatXUnits = 4;
// The warp-pipelined kernel (gemv_warp_cuda.cu): quantized weights, n_in up to 4096, up to
// kGemvWarpMaxTokens tokens (2 past n_in 2048); each warp's ring holds kGemvWarpStages stages.
constexpr int kGemvWarpMaxTokens = 4, kGemvWarpStages = 4;
// The launch shape gemv_cuda picks (exposed for the benchmark's report and the tests): a
// persistent grid, one wave of resident blocks, each streaming a balanced contiguous run of
// stages, the token chunks of a run side by side so their weight reads meet in L2.
struct GemvPlan {
  bool warp = false;           // the warp-pipelined kernel (stages per warp, not per block)
  int threads = 0;             // 32 * warps; each thread owns units_per_thread 32-element units
  int units_per_thread = 0;    // 1, 2 or 4
  int token_chunk = 0;         // tokens per block, a power of two (grid_y = ceil(n_tokens / chunk))
  int rows_per_stage = 0;      // rows in one shared-memory stage
  int n_stages = 0;            // stages over the whole matrix
  int stage_bytes = 0;         // bytes of one stage buffer
  int smem_bytes = 0;          // dynamic shared memory of one block
  int blocks_per_sm = 0;       // resident blocks per SM (occupancy API)
  int grid_x = 0, grid_y = 0;  // runs of stages x token chunks; grid_x * grid_y blocks
  const void* kernel = nullptr;
};
// False when the shape has no plan (n_in over 32768, a row too long for shared memory) or
// the occupancy query fails.
bool gemv_plan(const GemvCudaParams& p, GemvPlan* plan);
// The kernel for a type, units per thread and token chunk (gemv_cuda.cu); null if none.
const void* gemv_kernel(ggml::Type type, int units_per_thread, int token_chunk);
// The warp-pipelined kernel for a quantized type, units per lane (1, 2 or 4) and token chunk
// (1, 2 or 4); null if none.
const void* gemv_warp_kernel_for(ggml::Type type, int units_per_lane, int token_chunk);
cudaError_t launch_gemv(const GemvCudaParams& p, const GemvPlan& plan, cudaStream_t stream);
}  // namespace cuda_detail

}  // namespace tkv::kernels
