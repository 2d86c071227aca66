// Host side of the CUDA decode attention: validation ("[attention_cuda] ..."), the
// split plan (partitions sized so the grid fills the GPU), workspace carving, byte
// count, and the launch of partial + reduce kernels. Built only with TKV_CUDA.
#include "kernels/attention_cuda/attention_cuda.h"

#include <algorithm>
#include <cstdint>

#include "base/status.h"
#include "device/cuda_check.h"
#include "kernels/attention_cuda/attention_cuda_launch.h"
#include "kernels/kvcodec/turbo_tables_cuda.h"
#include "quant/kv_scheme.h"
#include "quant/turbo_tables.h"

namespace tkv::kernels {
namespace {

constexpr int kPartAlign = 64;  // tokens: a multiple of every block's tokens per loop step
constexpr int kMinPart = 256;   // below this the partial/merge overhead dominates
constexpr int kMaxPart = 4096;
constexpr int kMaxMmaPart = 16384;  // tensor-core path: longest partition
constexpr int kBlocksPerSm = 16;    // target grid: several waves of resident blocks
constexpr int kOneWaveMinLen =
    8192;  // tensor-core path: 1 block/SM from this context up (shorter: 8-warp blocks won)

int heads_per_block(int gqa) {
  return gqa % 4 == 0 ? 4 : gqa % 2 == 0 ? 2 : 1;
}

bool valid_bits(int b, bool v) {
  return b == 2 || b == 3 || b == 4 || b == 5 || b == 8 || (v && b == 1);
}

Status validate(const DecodeCudaParams& p) {
  const KvPageFormat& f = p.kv.format;
  auto bad = [](const std::string& m) {
    return Status(StatusCode::kInvalidArgument, "[attention_cuda] " + m);
  };
  // The CUDA kernels read bf16 or turbo pages (no f16 or affine kernels yet).
  if (f.scheme.kind != quant::KvKind::kBf16 && f.scheme.kind != quant::KvKind::kTurbo)
    return bad("scheme kind " + std::to_string((int)f.scheme.kind) + " is not bf16 or turbo");
  if (f.head_dim() != 64 && f.head_dim() != 128 && f.head_dim() != 256 && f.head_dim() != 512)
    return bad("head_dim " + std::to_string(f.head_dim()) + " not in {64,128,256,512}");
  if (!f.is_float() && (!valid_bits(f.scheme.k_bits, false) || !valid_bits(f.scheme.v_bits, true)))
    return bad("turbo widths k" + std::to_string(f.scheme.k_bits) + "v" +
               std::to_string(f.scheme.v_bits) + " not in k{2,3,4,5,8} v{1,2,3,4,5,8}");
  if (p.kv.format.n_kv_heads <= 0 || p.n_heads <= 0 || p.n_heads % p.kv.format.n_kv_heads != 0)
    return bad("n_heads " + std::to_string(p.n_heads) + " is not a multiple of n_kv_heads " +
               std::to_string(p.kv.format.n_kv_heads));
  if (p.kv.format.page_size <= 0 || (p.kv.format.page_size & (p.kv.format.page_size - 1)) != 0)
    return bad("page_size " + std::to_string(p.kv.format.page_size) + " is not a power of two");
  if (p.n_seqs <= 0 || p.n_seqs > 65535)
    return bad("n_seqs " + std::to_string(p.n_seqs) + " not in [1, 65535]");
  if (p.max_seq_len < 0) return bad("max_seq_len < 0");
  if (p.partition_tokens % kPartAlign != 0) return bad("partition_tokens must be a multiple of 64");
  if (p.kv.page_stride < 0) return bad("page_stride " + std::to_string(p.kv.page_stride) + " < 0");
  if (p.kv.page_stride > 0 && (int64_t)p.kv.page_stride * p.kv.format.page_size < p.max_seq_len)
    return bad("block table of " + std::to_string(p.kv.page_stride) +
               " pages per sequence holds fewer than max_seq_len " + std::to_string(p.max_seq_len) +
               " tokens");
  if (f.scheme.cpu_only())
    return bad("symmetric keys and the absmax value codebook (" + quant::kv_scheme_name(f.scheme) +
               ") are not on CUDA yet");
  if ((!p.q && !p.q_f32) || (!p.out && !p.out_f32) || !p.kv.k_data || !p.kv.v_data ||
      (p.kv.page_stride == 0 && !p.kv.page_indptr) || !p.kv.page_indices || !p.kv.seq_lens ||
      (!f.is_float() && (!p.kv.k_scale || !p.kv.k_zero || !p.kv.v_scale)))
    return bad("null device pointer");
  if (p.workspace_bytes < decode_workspace_bytes(p) || !p.workspace)
    return bad("workspace of " + std::to_string(p.workspace_bytes) + " bytes, need " +
               std::to_string(decode_workspace_bytes(p)));
  return Status();
}

}  // namespace

DecodePlan decode_plan(const DecodeCudaParams& p) {
  DecodePlan plan;
  const int gqa = p.kv.format.n_kv_heads > 0 ? std::max(1, p.n_heads / p.kv.format.n_kv_heads) : 1;
  plan.query_heads_per_block = heads_per_block(gqa);
  const int64_t blocks =
      (int64_t)p.n_seqs * p.kv.format.n_kv_heads * (gqa / plan.query_heads_per_block);
  const int len = std::max(1, p.max_seq_len);
  int part = p.partition_tokens;
  const bool tc = decode_uses_tensor_cores(p);
  const int sms = std::max(1, p.sm_count);
  if (part <= 0 && tc && blocks <= sms && len >= kOneWaveMinLen) {
    // One wave of 16-warp blocks, one per SM (mma_warps 16 below): the SM's 16 consumer
    // warps share one pipeline, so they finish together. With 4 or 2 blocks per SM the
    // blocks of one SM drifted apart by up to 35 % and the SM idled its last ~15 % (measured,
    // docs/bench/cuda.md); 16-token slots per warp, 256-token stages.
    const int n = std::max<int64_t>(1, sms / blocks);
    part = ((len + n - 1) / n + 255) / 256 * 256;
  } else if (part <= 0 && tc) {
    // Whole waves of 8-warp blocks, 2 per SM, each streaming ceil(part/128) stages, plus
    // about 2 x 64 tokens of fixed cost (pipeline fill, partial write, its share of the
    // merge). Pick the split with the fewest wave-tokens; ties go to fewer partitions.
    // Partitions stay <= kMaxMmaPart: on the H200, B=32 x 128k ran 3146 us as 2 x 65536
    // tokens (one wave) and 2590 us as 8 x 16384 (docs/bench/cuda.md, 4 blocks/SM then).
    const int64_t slots =
        (int64_t)sms * (p.kv.format.is_float() ? 1 : 2);  // bf16: 8-warp blocks of 192 KB, 1 per SM
    const int max_parts = std::max(1, (len + kMinPart - 1) / kMinPart);
    int64_t best = INT64_MAX;
    for (int n = 1; n <= max_parts; ++n) {
      const int cand = (len + n - 1) / n, cpart = (cand + 127) / 128 * 128;
      const int64_t parts = (len + cpart - 1) / cpart;
      if (parts != n || cpart > kMaxMmaPart)
        continue;  // the same split as a smaller n, or too long
      const int64_t waves = (blocks * parts + slots - 1) / slots;
      const int64_t cost = waves * (cpart / kPartAlign + 2);
      if (cost < best) best = cost, part = cpart;
    }
  }
  if (part <= 0) {
    const int64_t want_parts =
        std::max<int64_t>(1, (int64_t)p.sm_count * kBlocksPerSm / std::max<int64_t>(1, blocks));
    part = (int)std::clamp<int64_t>((len + want_parts - 1) / want_parts, kMinPart, kMaxPart);
    part = (part + kPartAlign - 1) / kPartAlign * kPartAlign;
  }
  plan.partition_tokens = part;
  plan.n_parts = (len + part - 1) / part;
  if (tc)
    plan.mma_warps =
        blocks * plan.n_parts <= sms && len >= kOneWaveMinLen && !p.kv.format.is_float() ? 16 : 8;
  return plan;
}

int64_t decode_workspace_bytes(const DecodeCudaParams& p) {
  const DecodePlan plan = decode_plan(p);
  return (int64_t)p.n_seqs * p.n_heads * plan.n_parts * (p.kv.format.head_dim() + 2) *
             (int64_t)sizeof(float) +
         (int64_t)p.n_seqs * p.n_heads * (int64_t)sizeof(int);  // + the merge counters
}

int64_t decode_bytes_read(const DecodeCudaParams& p, const int32_t* host_seq_lens) {
  int64_t tokens = 0, pages = 0;
  for (int s = 0; s < p.n_seqs; ++s) {
    tokens += host_seq_lens[s];
    pages += (host_seq_lens[s] + p.kv.format.page_size - 1) / p.kv.format.page_size;
  }
  const int64_t q_bytes = (int64_t)p.n_seqs * p.n_heads * p.kv.format.head_dim() * 2;
  return tokens * p.kv.format.n_kv_heads * p.kv.format.rows().row_bytes + pages * 4 + q_bytes;
}

Status decode_attention_cuda(const DecodeCudaParams& p, cudaStream_t stream) {
  TKV_RETURN_IF_ERROR(validate(p));
  cuda_detail::DecodeLaunch l;
  l.p = p;
  l.plan = decode_plan(p);
  l.q_scale = p.softmax_scale * 1.4426950408889634f;
  l.ws_acc = static_cast<float*>(p.workspace);
  l.ws_ml = l.ws_acc + (int64_t)p.n_seqs * p.n_heads * l.plan.n_parts * p.kv.format.head_dim();
  const bool turbo = !p.kv.format.is_float();
  if (turbo) {
    l.centroids = turbo_centroids_cuda(p.kv.format.scheme.v_bits);
    l.signs = turbo_signs_cuda(p.kv.format.head_dim());
    l.inv_sqrt = quant::turbo_inv_sqrt(p.kv.format.head_dim());
    if (!l.centroids || !l.signs)
      return Status(StatusCode::kInternal, "[attention_cuda] table upload failed");
  }
  l.counters = reinterpret_cast<int*>(l.ws_ml + 2 * (int64_t)p.n_seqs * p.n_heads * l.plan.n_parts);
  if (decode_uses_tensor_cores(
          p)) {  // partials and their merge in one kernel (the last block of a row merges)
    if (p.merge_counters)  // the caller's counters: zero, and left zero by the kernel
      l.counters = p.merge_counters;
    else
      TKV_RETURN_IF_ERROR(device::cuda_status(
          cudaMemsetAsync(l.counters, 0, (size_t)p.n_seqs * p.n_heads * sizeof(int), stream),
          "[attention_cuda] counter reset"));
    return device::cuda_status(cuda_detail::launch_decode_turbo_mma(l, stream),
                               "[attention_cuda] decode launch");
  }
  const cudaError_t e = !turbo ? cuda_detail::launch_decode_bf16(l, stream)
                               : cuda_detail::launch_decode_turbo(l, stream);
  TKV_RETURN_IF_ERROR(device::cuda_status(e, "[attention_cuda] decode partial launch"));
  return device::cuda_status(cuda_detail::launch_decode_reduce(l, turbo, stream),
                             "[attention_cuda] reduce launch");
}

}  // namespace tkv::kernels
