// CUDA decode attention over a paged KV cache (turbo or bf16): one new query
// token per sequence, GQA, split-KV (flash-decoding) partials + a reduce kernel
// that merges them, applies turbo's deferred inverse FWHT and writes bf16. Host
// planning (partition size, workspace) is split from the launch, as in FlashInfer.
// Design and measured speed: docs/cuda-kernels.md, docs/bench/cuda.md.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/attention_cuda/paged_kv.h"

namespace tkv {
class Status;  // base/status.h; declared here so .cu files can include this header
}

namespace tkv::kernels {

struct DecodeCudaParams {
  PagedKv kv;  // device pointers; the cache holds each seq's tokens incl. the new one
  int n_seqs = 0;
  int n_heads = 0;  // query heads; a multiple of kv.format.n_kv_heads (head h uses kv head h / gqa)
  int max_seq_len = 0;          // host-side upper bound of seq_lens (sizes the split)
  float softmax_scale = 0.0f;   // usually 1/sqrt(head_dim)
  const uint16_t* q = nullptr;  // [n_seqs, n_heads, head_dim] bf16, device
  uint16_t* out = nullptr;      // [n_seqs, n_heads, head_dim] bf16, device
  // General kernel only: fp32 q and/or out in place of the bf16 ones (set, they win; q or
  // out may then be null). The whole-model forward uses both: bf16 q/out cost SmolLM2
  // a mean KL of 0.004-0.1 (docs/bench/cuda-e2e-tests.txt). Never the tensor-core path.
  const float* q_f32 = nullptr;  // [n_seqs, n_heads, head_dim] fp32, device
  float* out_f32 = nullptr;      // [n_seqs, n_heads, head_dim] fp32, device
  int partition_tokens = 0;      // split size (multiple of 64); 0 = auto (fill the GPU)
  int sm_count = 132;            // multiprocessors, for the auto split
  int min_blocks_per_sm =
      0;  // 3: registers capped for 3 blocks/SM (4-head tiles, d 128; k8v3/k8v4/k4v3/k4v2/bf16)
  bool general_kernel =
      false;                  // true: never the tensor-core path (the FP32 kernel every format has)
  void* workspace = nullptr;  // >= decode_workspace_bytes(*this), device
  int64_t workspace_bytes = 0;
  // Optional (tensor-core path): >= n_seqs * n_heads ints of device memory kept for this
  // purpose across calls, zeroed once by the caller (cudaMemset). Each call counts the
  // finished partitions of a block row in them and leaves them zero again (the last block
  // wraps its counter), so the per-call reset of the workspace's counters (a
  // cudaMemsetAsync, ~1 us per call on the H200) is skipped. One stream at a time, like the
  // workspace. Null: the workspace's counters, reset by each call.
  int* merge_counters = nullptr;
  // Tensor-core path with merge_counters set: launch with programmatic stream serialization
  // (PDL, sm_90), so the blocks start while the previous kernel in the stream drains (it
  // waits in griddepcontrol.wait before reading q, the cache, the page table or the
  // counters; only its shared-memory setup and tensor-map prefetch run earlier). The
  // previous kernel may trigger it early (griddepcontrol.launch_dependents, as
  // kvcodec_encode_cuda does). Other paths, and merge_counters null, ignore it.
  bool programmatic_launch = false;
};

// The split the kernels will use: tokens per partition and partitions per sequence.
struct DecodePlan {
  int partition_tokens = 0;
  int n_parts = 0;
  int query_heads_per_block = 0;  // GQA heads sharing each K/V load (1, 2 or 4)
  int mma_warps =
      0;  // tensor-core path: consumer warps per block, 16 (one block per SM, the grid one
          // wave) or 8 (two per SM; a bf16 cache: always 8, one per SM); 0 elsewhere
};
DecodePlan decode_plan(const DecodeCudaParams& p);
// True when decode_attention_cuda takes the tensor-core path: turbo k8v3/k8v4 (signed or
// not) or k4v3/k4v2, or bf16, with head_dim 128, n_heads/n_kv_heads a multiple of 4,
// min_blocks_per_sm 0, not general_kernel. Its error model differs (turbo: fp16 P and V·scale;
// bf16: bf16 P): tests/cuda/attention_cuda_test.cc.
inline bool decode_uses_tensor_cores(const DecodeCudaParams& p) {
  const KvPageFormat& f = p.kv.format;
  const bool widths = f.is_float() ||
                      (f.scheme.k_bits == 8 && (f.scheme.v_bits == 3 || f.scheme.v_bits == 4)) ||
                      (f.scheme.k_bits == 4 &&
                       (f.scheme.v_bits == 2 || f.scheme.v_bits == 3));  // k_signed: 8-bit only
  return widths && f.head_dim() == 128 && p.kv.format.n_kv_heads > 0 &&
         (p.n_heads / p.kv.format.n_kv_heads) % 4 == 0 && p.min_blocks_per_sm == 0 &&
         !p.general_kernel && !p.q_f32 && !p.out_f32;
}
// Workspace for the fp32 partials, n_seqs * n_heads * n_parts * (head_dim + 2) floats, and
// n_seqs * n_heads int merge counters (reset by each call unless merge_counters is set).
int64_t decode_workspace_bytes(const DecodeCudaParams& p);
// Bytes the decode reads from the cache for these seq_lens (host copy): K/V data,
// scales and page-table entries, plus q; the figure GB/s is computed on.
int64_t decode_bytes_read(const DecodeCudaParams& p, const int32_t* host_seq_lens);

// Validates p ("[attention_cuda] ..."), then launches the partial and reduce kernels
// on stream (the tensor-core path: one kernel whose last partition block of each
// (sequence, head tile) merges, after a counter reset when merge_counters is null). Asynchronous:
// the error of a launch is returned, not of the execution.
Status decode_attention_cuda(const DecodeCudaParams& p, cudaStream_t stream = nullptr);

}  // namespace tkv::kernels
