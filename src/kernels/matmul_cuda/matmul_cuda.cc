// Host side of the CUDA decode GEMV: validation ("[matmul_cuda] ..."), the launch plan
// (threads from n_in, rows per shared-memory stage from the row's bytes, a persistent grid
// of the blocks that fit at once) and the launch. Compiled only with TKV_CUDA
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
constexpr int kMaxSmemPerBlock = 200 * 1024;  // under sm_90's 227 KB per block
constexpr int kWarpStageTarget = 2048;        // bytes per warp stage (whole rows, at least one)

bool occupancy(GemvPlan* g) {
  if (g->kernel == nullptr ||
      cudaFuncSetAttribute(g->kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, g->smem_bytes) !=
          cudaSuccess ||
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&g->blocks_per_sm, g->kernel, g->threads,
                                                    g->smem_bytes) != cudaSuccess ||
      g->blocks_per_sm == 0) {
    (void)cudaGetLastError();
    return false;
  }
  return true;
}

// The warp-pipelined kernel: x of the chunk's tokens staged in shared memory (48 bytes per
// unit and token) on its way to registers, then per warp a ring of kGemvWarpStages stages of
// whole rows (about kWarpStageTarget bytes each); 8 warps per block, fewer when rows are long.
bool gemv_warp_plan(const GemvCudaParams& p, GemvPlan* plan) {
  const int64_t units = p.n_in / 32, rb = (int64_t)ggml::row_bytes(p.type, p.n_in);
  GemvPlan g;
  g.warp = true;
  g.units_per_thread = units <= 32 ? 1 : units <= 64 ? 2 : units <= 128 ? 4 : 0;
  g.token_chunk = p.n_tokens <= 1 ? 1 : p.n_tokens <= 2 ? 2 : 4;
  if (g.units_per_thread == 0 || p.n_tokens > kGemvWarpMaxTokens ||
      g.units_per_thread * g.token_chunk > kGemvQuantXUnits)
    return false;
  const int64_t target = p.stage_bytes > 0 ? p.stage_bytes : kWarpStageTarget;
  g.rows_per_stage = (int)std::max<int64_t>(1, std::min<int64_t>(target / rb, p.n_out));
  g.stage_bytes = (int)((g.rows_per_stage * rb + 32 + 15) / 16 * 16);
  const int64_t x_bytes = 48 * units * g.token_chunk;
  int warps = 8;
  while (warps > 1 && x_bytes + (int64_t)warps * kGemvWarpStages * g.stage_bytes > kMaxSmemPerBlock)
    warps /= 2;
  const int64_t smem = x_bytes + (int64_t)warps * kGemvWarpStages * g.stage_bytes;
  if (smem > kMaxSmemPerBlock) return false;
  g.threads = 32 * warps;
  g.smem_bytes = (int)smem;
  g.kernel = gemv_warp_kernel_for(p.type, g.units_per_thread, g.token_chunk);
  if (!occupancy(&g)) return false;
  g.n_stages = (int)((p.n_out + g.rows_per_stage - 1) / g.rows_per_stage);
  g.grid_y = 1;
  g.grid_x = (int)std::min<int64_t>((g.n_stages + warps - 1) / warps,
                                    (int64_t)p.sm_count * g.blocks_per_sm);
  *plan = g;
  return true;
}

bool gemv_block_plan(const GemvCudaParams& p, GemvPlan* plan) {
  const int64_t units = p.n_in / 32, rb = (int64_t)ggml::row_bytes(p.type, p.n_in);
  GemvPlan g;
  g.units_per_thread = units <= 256 ? 1 : units <= 512 ? 2 : units <= 1024 ? 4 : 0;
  if (g.units_per_thread == 0) return false;
  // x of one thread's units in registers (kGemv*XUnits): the chunk is the power of two at
  // or above n_tokens, capped there (more tokens: more blocks over the same rows, L2 hits).
  const bool quant =
      p.type != ggml::Type::kF32 && p.type != ggml::Type::kF16 && p.type != ggml::Type::kBF16;
  const int max_chunk = (quant ? kGemvQuantXUnits : kGemvFloatXUnits) / g.units_per_thread;
  g.token_chunk = 1;
  while (g.token_chunk < p.n_tokens && g.token_chunk < max_chunk) g.token_chunk *= 2;
  g.threads = 32 * (int)((units + 32 * g.units_per_thread - 1) / (32 * g.units_per_thread));
  const int64_t target = p.stage_bytes > 0 ? p.stage_bytes : kStageTarget;
  g.rows_per_stage = (int)std::max<int64_t>(1, std::min<int64_t>(target / rb, p.n_out));
  g.stage_bytes = (int)((g.rows_per_stage * rb + 32 + 15) / 16 * 16);
  const int red = (g.threads / 32) * g.rows_per_stage * g.token_chunk * 4;
  g.smem_bytes = kStages * g.stage_bytes + red;
  if (g.smem_bytes > kMaxSmemPerBlock) return false;
  g.grid_y = (p.n_tokens + g.token_chunk - 1) / g.token_chunk;
  g.kernel = gemv_kernel(p.type, g.units_per_thread, g.token_chunk);
  if (!occupancy(&g)) return false;
  g.n_stages = (int)((p.n_out + g.rows_per_stage - 1) / g.rows_per_stage);
  const int wave = std::max(1, p.sm_count * g.blocks_per_sm / g.grid_y);
  g.grid_x = std::min(g.n_stages, wave);
  *plan = g;
  return true;
}

}  // namespace

bool gemv_plan(const GemvCudaParams& p, GemvPlan* plan) {
  using V = GemvCudaParams::Variant;
  const bool quant =
      p.type != ggml::Type::kF32 && p.type != ggml::Type::kF16 && p.type != ggml::Type::kBF16;
  if (p.variant == V::kWarp) return quant && gemv_warp_plan(p, plan);
  // Auto: the warp kernel for 1-2 tokens (it won every 1-token shape on an H100; at 4 tokens
  // Qwen2.5's ffn_up took 22.0 vs 18.1 µs, docs/bench/cuda.md), the block kernel otherwise.
  if (p.variant == V::kAuto && quant && p.n_tokens <= 2 && gemv_warp_plan(p, plan)) return true;
  return gemv_block_plan(p, plan);
}

}  // namespace cuda_detail

bool gemv_cuda_supports(ggml::Type type) {
  using T = ggml::Type;
  switch (type) {
    case T::kQ4_0:
    case T::kQ4_1:
    case T::kQ5_0:
    case T::kQ8_0:
    case T::kQ4_K:
    case T::kQ5_K:
    case T::kQ6_K:
    case T::kF16:
    case T::kBF16:
    case T::kF32:
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
  const int64_t s1 = p.split1 > 0 ? p.split1 : p.n_out, s2 = p.split2 > 0 ? p.split2 : p.n_out;
  if (s1 > s2 || s2 > p.n_out || (s1 < s2 && !p.y1) || (s2 < p.n_out && !p.y2))
    return bad("split rows " + std::to_string(p.split1) + ", " + std::to_string(p.split2) + " of " +
               std::to_string(p.n_out) + " (or a null y1/y2)");
  if (reinterpret_cast<uintptr_t>(p.w) % 16 != 0 || reinterpret_cast<uintptr_t>(p.x) % 16 != 0)
    return bad("w and x must be 16-byte aligned");
  cuda_detail::GemvPlan plan;
  if (!cuda_detail::gemv_plan(p, &plan))
    return bad("no plan for n_in " + std::to_string(p.n_in) + " of " + std::string(tr->name));
  return device::cuda_status(cuda_detail::launch_gemv(p, plan, stream), "[matmul_cuda] launch");
}

}  // namespace tkv::kernels
#endif  // TKV_WITH_CUDA
