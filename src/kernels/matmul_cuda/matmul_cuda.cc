// Host side of the CUDA decode GEMV: validation ("[matmul_cuda] ..."), the launch plan
// (threads from n_in, rows per shared-memory stage from the row's bytes, rows per block
// so the grid fills the GPU about once) and the launch. Compiled only with TKV_CUDA
// (the kernels .cc glob is shared with CPU builds).
#if defined(TKV_WITH_CUDA)
#include <algorithm>
#include <cstdint>
#include <string>

#include "base/status.h"
#include "device/cuda_check.h"
#include "kernels/matmul_cuda/matmul_cuda.h"

namespace tkv::kernels {
namespace cuda_detail {
namespace {

constexpr int kStages = 3;                    // gemv_cuda.cu's pipeline depth
constexpr int kStageTarget = 8192;            // bytes: about 16 KB in flight per block
constexpr int kSmemPerSm = 227 * 1024;        // usable shared memory per SM (sm_90)
constexpr int kMaxSmemPerBlock = 200 * 1024;  // leaves room for the driver's reserve

}  // namespace

bool gemv_plan(const GemvCudaParams& p, GemvPlan* plan) {
  const int64_t units = p.n_in / 32, rb = (int64_t)ggml::row_bytes(p.type, p.n_in);
  GemvPlan g;
  g.units_per_thread = units <= 256 ? 1 : units <= 512 ? 2 : units <= 1024 ? 4 : 0;
  if (g.units_per_thread == 0) return false;
  // x of one thread's units in registers: 32 * units_per_thread * token_chunk <= 128 floats.
  g.token_chunk = p.n_tokens == 1 ? 1 : 4 / g.units_per_thread;
  g.threads = 32 * (int)((units + 32 * g.units_per_thread - 1) / (32 * g.units_per_thread));
  g.rows_per_stage = (int)std::max<int64_t>(1, std::min<int64_t>(kStageTarget / rb, p.n_out));
  g.stage_bytes = (int)((g.rows_per_stage * rb + 32 + 15) / 16 * 16);
  const int red = (g.threads / 32) * g.rows_per_stage * g.token_chunk * 4;
  g.smem_bytes = kStages * g.stage_bytes + red;
  if (g.smem_bytes > kMaxSmemPerBlock) return false;
  g.grid_y = (p.n_tokens + g.token_chunk - 1) / g.token_chunk;
  // Blocks resident per SM (threads, shared memory), then rows per block so that one wave
  // of blocks covers the matrix: each block then streams several stages back to back.
  const int per_sm =
      std::max(1, std::min({2048 / g.threads, 32, kSmemPerSm / (g.smem_bytes + 1024)}));
  const int64_t stages = (p.n_out + g.rows_per_stage - 1) / g.rows_per_stage;
  const int64_t wave = std::max<int64_t>(1, (int64_t)p.sm_count * per_sm / g.grid_y);
  g.rows_per_block = (int)((stages + wave - 1) / wave) * g.rows_per_stage;
  g.grid_x = (int)((p.n_out + g.rows_per_block - 1) / g.rows_per_block);
  *plan = g;
  return true;
}

}  // namespace cuda_detail

bool gemv_cuda_supports(ggml::Type type) {
  using T = ggml::Type;
  switch (type) {
    case T::kQ4_0: case T::kQ4_1: case T::kQ5_0: case T::kQ8_0: case T::kQ4_K:
    case T::kQ5_K: case T::kQ6_K: case T::kF16: case T::kBF16: case T::kF32:
      return true;
    default:
      return false;
  }
}

Status gemv_cuda(const GemvCudaParams& p, cudaStream_t stream) {
  auto bad = [](const std::string& m) {
    return Status(StatusCode::kInvalidArgument, "[matmul_cuda] " + m);
  };
  const ggml::TypeTraits* tr = ggml::type_traits(static_cast<uint32_t>(p.type));
  if (tr == nullptr || !gemv_cuda_supports(p.type))
    return bad("weight type " + std::string(tr ? tr->name : "?") + " has no CUDA GEMV");
  if (p.n_in <= 0 || p.n_in % tr->block_elems != 0 || p.n_in % 32 != 0)
    return bad("n_in " + std::to_string(p.n_in) + " is not a positive multiple of " +
               std::to_string(std::max(32, tr->block_elems)));
  if (p.n_out <= 0 || p.n_out > INT32_MAX) return bad("n_out " + std::to_string(p.n_out));
  if (p.n_tokens < 1 || p.n_tokens > kGemvMaxTokens)
    return bad("n_tokens " + std::to_string(p.n_tokens) + " not in 1.." +
               std::to_string(kGemvMaxTokens));
  if (!p.w || !p.x || !p.y) return bad("null w, x or y");
  if (reinterpret_cast<uintptr_t>(p.w) % 16 != 0 || reinterpret_cast<uintptr_t>(p.x) % 16 != 0)
    return bad("w and x must be 16-byte aligned");
  cuda_detail::GemvPlan plan;
  if (!cuda_detail::gemv_plan(p, &plan))
    return bad("no plan for n_in " + std::to_string(p.n_in) + " of " + std::string(tr->name));
  return device::cuda_status(cuda_detail::launch_gemv(p, plan, stream), "[matmul_cuda] launch");
}

}  // namespace tkv::kernels
#endif  // TKV_WITH_CUDA
