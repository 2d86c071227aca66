// Decode steps as CUDA graphs. A decode step of a 8B model is ~500 small launches (the
// GEMVs, norms, RoPE, encode, attention and merge of 32 layers); issued one by one, the
// host's launch rate, not the GPU, sets the step time of small models. The step's kernels
// are captured once per key (tokens, bucketed longest sequence and block-table stride,
// logits rows, the scratch buffers' addresses) and replayed; the per-step inputs
// (embeddings, positions, slots, seq_lens, page table, logits rows) are copied into the
// same device buffers before each launch, so a replay reads the new step. A changed key
// re-captures and updates the executable graph in place when its topology allows.
#include <algorithm>

#include "kernels/matmul_cuda/gemm_cuda.h"

#include "device/cuda_check.h"
#include "model/forward_cuda.h"
#include "model/forward_cuda_util.h"

namespace tkv::model {
namespace {
using cuda_fwd::ck;
using cuda_fwd::ensure;
}  // namespace

std::vector<const void*> CudaForward::graph_buffers() const {
  return {x_.data(),
          h_.data(),
          q_.data(),
          k_.data(),
          v_.data(),
          attn_.data(),
          ff_gate_.data(),
          ff_up_.data(),
          pos_.data(),
          slots_.data(),
          seq_lens_.data(),
          pages_.data(),
          attn_ws_.data(),
          rows_.data(),
          logits_in_.data(),
          logits_.data(),
          gemm_scratch_.data(),
          cublas_,
          q_bf16_.data(),
          out_bf16_.data()};
}

// What a capture must not allocate: the attention workspace and, for steps that reach the
// GEMM, the cuBLAS handle and the scratch of the largest matrix.
Status CudaForward::prepare_capture(int64_t n) {
  const int64_t ws_bytes = kernels::decode_workspace_bytes(decode_params(0, n));
  TKV_RETURN_IF_ERROR(ensure(attn_ws_, static_cast<size_t>(ws_bytes)));
  if (n < kGemmMinTokens && n_rows_ < kGemmMinTokens) return Status();
  if (!cublas_) TKV_RETURN_IF_ERROR(kernels::gemm_cuda_create(&cublas_));
  int64_t bytes = kernels::gemm_cuda_scratch_bytes(output_.n_in, output_.n_out, n_rows_);
  for (const DevLayer& D : layers_)
    for (const DevMatrix* m : {&D.wq, &D.wk, &D.wv, &D.wo, &D.w_gate, &D.w_up, &D.w_down})
      bytes = std::max(bytes, kernels::gemm_cuda_scratch_bytes(m->n_in, m->n_out, n));
  return ensure(gemm_scratch_, static_cast<size_t>(bytes));
}

Status CudaForward::run_graph(int64_t n) {
  TKV_RETURN_IF_ERROR(prepare_capture(n));
  StepGraph& g = graphs_[n];
  std::vector<const void*> bufs = graph_buffers();
  if (g.exec && g.max_seq_len == max_seq_len_ && g.page_stride == page_stride_ &&
      g.n_rows == n_rows_ && g.buffers == bufs)
    return ck(cudaGraphLaunch(g.exec, stream_), "[cuda] graph launch");

  TKV_RETURN_IF_ERROR(
      ck(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeRelaxed), "[cuda] graph capture"));
  const Status st = step_kernels(n);
  cudaGraph_t graph = nullptr;
  const cudaError_t end = cudaStreamEndCapture(stream_, &graph);
  if (!st.ok() || end != cudaSuccess) {
    if (graph) cudaGraphDestroy(graph);
    TKV_RETURN_IF_ERROR(st);
    return ck(end, "[cuda] graph capture");
  }
  bool updated = false;
  if (g.exec) {
    cudaGraphExecUpdateResultInfo info;
    updated = cudaGraphExecUpdate(g.exec, graph, &info) == cudaSuccess;
    if (!updated) {
      (void)cudaGetLastError();
      cudaGraphExecDestroy(g.exec);
      g.exec = nullptr;
    }
  }
  cudaError_t e = cudaSuccess;
  if (!updated) e = cudaGraphInstantiate(&g.exec, graph, 0);
  cudaGraphDestroy(graph);
  if (e != cudaSuccess) {
    g.exec = nullptr;
    return ck(e, "[cuda] graph instantiate");
  }
  g.max_seq_len = max_seq_len_;
  g.page_stride = page_stride_;
  g.n_rows = n_rows_;
  g.buffers = std::move(bufs);
  return ck(cudaGraphLaunch(g.exec, stream_), "[cuda] graph launch");
}

}  // namespace tkv::model
