// CUDA prefill attention over a paged KV cache (turbo or bf16): causal attention of a
// ragged batch of query chunks, each chunk the last q_len positions of its sequence
// (a cached prefix before it is attended too). The chunk's own K/V must already be in
// the cache (kvcodec_encode_cuda runs first). One block per (query tile, kv head,
// sequence): the tile's tokens × the kv head's GQA query heads (≤ 64 rows) share every
// K/V tile, dequantized once into shared memory; fp32 scores and online softmax
// (exp2 domain, as the decode kernel); turbo's inverse FWHT once per output row.
// Design and figures: docs/cuda-kernels.md. Same math as decode_attention_cuda run
// per token (tests/cuda/prefill_cuda_test.cc).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/attention_cuda/paged_kv.h"

namespace tkv {
class Status;  // base/status.h; declared here so .cu files can include this header
}

namespace tkv::kernels {

struct PrefillCudaParams {
  // kv.seq_lens[s]: tokens of sequence s in the cache, its chunk included; the chunk's
  // tokens sit at positions [seq_lens[s] - q_lens[s], seq_lens[s]). Block table or CSR.
  PagedKv kv;
  int n_seqs = 0;
  int n_heads = 0;    // a multiple of kv.format.n_kv_heads, at most 64 per kv head
  int max_q_len = 0;  // host bound of q_lens (sizes the grid)
  float softmax_scale = 0.0f;
  const int32_t* q_offsets = nullptr;  // [n_seqs] device: row of the chunk's first token in q/out
  const int32_t* q_lens = nullptr;     // [n_seqs] device: tokens of the chunk (0 allowed)
  const float* q = nullptr;            // [rows, n_heads, head_dim] fp32, device
  float* out = nullptr;                // [rows, n_heads, head_dim] fp32, device (chunk rows only)
};

// True when prefill_attention_cuda takes this format and head count (bf16 or turbo,
// head_dim 64/128/256, GQA <= 64); otherwise callers keep the decode kernel per token.
bool prefill_cuda_supports(const KvPageFormat& f, int n_heads);

// Validates p ("[attention_cuda] prefill: ..."), then launches one kernel on stream.
// Asynchronous: the error of the launch is returned, not of the execution.
Status prefill_attention_cuda(const PrefillCudaParams& p, cudaStream_t stream = nullptr);

namespace cuda_detail {
// Internal: what prefill_cuda.cc hands the kernel file.
struct PrefillLaunch {
  PrefillCudaParams p;
  float q_scale = 0.0f;              // softmax_scale * log2(e)
  int gqa = 1;                       // query heads per kv head
  int q_tile = 1;                    // query tokens per block (q_tile * gqa <= 64)
  const float* centroids = nullptr;  // [2^v_bits] device (turbo)
  const float* signs = nullptr;      // [head_dim] device (turbo)
  float inv_sqrt = 0.0f;             // 1/sqrt(head_dim) (turbo)
};
constexpr int kPrefillRows = 64;  // query rows (tokens × GQA heads) per block
cudaError_t launch_prefill(const PrefillLaunch& l, cudaStream_t stream);
}  // namespace cuda_detail

}  // namespace tkv::kernels
