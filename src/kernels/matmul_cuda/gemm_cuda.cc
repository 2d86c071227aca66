// Host side of the CUDA prefill GEMM (gemm_cuda.h): validation, the slabs of weight rows
// and the cuBLAS call. Compiled only with TKV_CUDA (the kernels .cc glob is shared with
// CPU builds).
#if defined(TKV_WITH_CUDA)
#include <cublas_v2.h>

#include <algorithm>
#include <string>

#include "base/status.h"
#include "device/cuda_check.h"
#include "kernels/matmul_cuda/gemm_cuda.h"
#include "kernels/matmul_cuda/matmul_cuda.h"

namespace tkv::kernels {
namespace {

int64_t slab_rows(int64_t n_in, int64_t n_out) {
  return std::clamp<int64_t>(kGemmSlabBytes / (2 * n_in), 1, n_out);
}
int64_t align16(int64_t b) {
  return (b + 15) / 16 * 16;
}

Status cublas_status(cublasStatus_t s, const char* what) {
  if (s == CUBLAS_STATUS_SUCCESS) return Status();
  return make_error(StatusCode::kInternal, "[matmul_cuda] {}: {}", what, cublasGetStatusString(s));
}

}  // namespace

bool gemm_cuda_supports(ggml::Type type) {
  return gemv_cuda_supports(type);
}

int64_t gemm_cuda_scratch_bytes(int64_t n_in, int64_t n_out, int64_t n_tokens) {
  return align16(2 * n_in * slab_rows(n_in, n_out)) + align16(2 * n_in * n_tokens);
}

// The handle and a workspace of its own: with one set, cuBLAS allocates nothing while a
// stream is captured into a CUDA graph (the forward's decode steps).
struct GemmHandle {
  cublasHandle_t h = nullptr;
  void* workspace = nullptr;
};
constexpr size_t kCublasWorkspace = size_t{32} << 20;

Status gemm_cuda_create(void** handle) {
  auto* g = new GemmHandle;
  Status st = cublas_status(cublasCreate(&g->h), "cublasCreate");
  if (st.ok())
    st = device::cuda_status(cudaMalloc(&g->workspace, kCublasWorkspace),
                             "[matmul_cuda] cuBLAS workspace");
  if (st.ok())
    st = cublas_status(cublasSetWorkspace(g->h, g->workspace, kCublasWorkspace),
                       "cublasSetWorkspace");
  if (!st.ok()) {
    gemm_cuda_destroy(g);
    return st;
  }
  *handle = g;
  return Status();
}

void gemm_cuda_destroy(void* handle) {
  auto* g = static_cast<GemmHandle*>(handle);
  if (!g) return;
  if (g->h) cublasDestroy(g->h);
  if (g->workspace) cudaFree(g->workspace);
  delete g;
}

Status gemm_cuda(const GemmCudaParams& p, cudaStream_t stream) {
  auto bad = [](const std::string& m) {
    return Status(StatusCode::kInvalidArgument, "[matmul_cuda] gemm: " + m);
  };
  const ggml::TypeTraits* tr = ggml::type_traits(static_cast<uint32_t>(p.type));
  if (tr == nullptr || !gemm_cuda_supports(p.type))
    return bad("weight type " + std::string(tr ? tr->name : "?") + " has no CUDA GEMM");
  if (p.n_in <= 0 || p.n_in % std::max(32, tr->block_elems) != 0 || p.n_in > INT32_MAX)
    return bad("n_in " + std::to_string(p.n_in) + " is not a positive multiple of " +
               std::to_string(std::max(32, tr->block_elems)));
  if (p.n_out <= 0 || p.n_out > INT32_MAX) return bad("n_out " + std::to_string(p.n_out));
  if (p.n_tokens <= 0 || p.n_tokens > INT32_MAX)
    return bad("n_tokens " + std::to_string(p.n_tokens));
  if (!p.w || !p.x || !p.y || !p.scratch || !p.cublas)
    return bad("null w, x, y, scratch or handle");
  if (p.scratch_bytes < gemm_cuda_scratch_bytes(p.n_in, p.n_out, p.n_tokens))
    return bad("scratch of " + std::to_string(p.scratch_bytes) + " bytes, needs " +
               std::to_string(gemm_cuda_scratch_bytes(p.n_in, p.n_out, p.n_tokens)));
  if (reinterpret_cast<uintptr_t>(p.scratch) % 16 != 0) return bad("scratch not 16-byte aligned");
  const int64_t rows = slab_rows(p.n_in, p.n_out);
  uint16_t* wb = static_cast<uint16_t*>(p.scratch);
  uint16_t* xb = wb + align16(2 * p.n_in * rows) / 2;
  TKV_RETURN_IF_ERROR(device::cuda_status(
      cuda_detail::f32_to_bf16(p.x, p.n_tokens * p.n_in, xb, stream), "[matmul_cuda] x to bf16"));
  cublasHandle_t h = static_cast<GemmHandle*>(p.cublas)->h;
  TKV_RETURN_IF_ERROR(cublas_status(cublasSetStream(h, stream), "cublasSetStream"));
  const size_t row_bytes = ggml::row_bytes(p.type, p.n_in);
  const float one = 1.0f, zero = 0.0f;
  for (int64_t r0 = 0; r0 < p.n_out; r0 += rows) {
    const int64_t nr = std::min(rows, p.n_out - r0);
    const void* w = static_cast<const uint8_t*>(p.w) + static_cast<size_t>(r0) * row_bytes;
    TKV_RETURN_IF_ERROR(device::cuda_status(
        cuda_detail::dequant_bf16(w, p.type, nr, p.n_in, wb, stream), "[matmul_cuda] dequant"));
    // Column-major view: the slab is [n_in, nr] (W rows as columns), x is [n_in, n_tokens],
    // y is [n_out, n_tokens]: y[r0.., :] = slab^T * x.
    TKV_RETURN_IF_ERROR(cublas_status(
        cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(nr),
                     static_cast<int>(p.n_tokens), static_cast<int>(p.n_in), &one, wb, CUDA_R_16BF,
                     static_cast<int>(p.n_in), xb, CUDA_R_16BF, static_cast<int>(p.n_in), &zero,
                     p.y + r0, CUDA_R_32F, static_cast<int>(p.n_out), CUBLAS_COMPUTE_32F,
                     CUBLAS_GEMM_DEFAULT),
        "cublasGemmEx"));
  }
  return Status();
}

}  // namespace tkv::kernels
#endif  // TKV_WITH_CUDA
