// Activation quantization for the CPU matmul: fp32 rows -> int8 blocks with the
// same rounding as llama.cpp's quantize_row_q8_0 / q8_1 / q8_K (ggml-quants.c),
// so our integer dot products see the same inputs llama.cpp's do. Stored as
// structure-of-arrays (qs, d, s, bsums) rather than ggml block structs so the
// kernels load aligned 32-byte vectors. Quantized once per matmul call.
#pragma once
#include <cstdint>
#include <vector>

#include "base/thread_pool.h"

namespace tkv::kernels {

enum class ActKind {
  kQ8_0,  // 32-blocks, d = fp16(amax/127); s = d*sum(q) exactly (for Q4_0/Q5_0 offsets)
  kQ8_1,  // 32-blocks as Q8_0 but s = fp16(d_f32*sum(q)) as ggml stores it (Q4_1/Q5_1 mins)
  kQ8_K,  // 256-blocks, d = max/-127 in fp32 (signed), bsums per 16 elements
};

struct ActQ8 {
  ActKind kind = ActKind::kQ8_0;
  int64_t n_tokens = 0, n_in = 0;
  int64_t n_blocks = 0;      // blocks per token (n_in / 32 or n_in / 256)
  int8_t* qs = nullptr;      // [n_tokens, n_in]
  float* d = nullptr;        // [n_tokens, n_blocks]
  float* s = nullptr;        // [n_tokens, n_blocks] (32-block kinds only)
  int16_t* bsums = nullptr;  // [n_tokens, n_in / 16] (kQ8_K only)

  const int8_t* qs_row(int64_t t) const { return qs + t * n_in; }
  const float* d_row(int64_t t) const { return d + t * n_blocks; }
  const float* s_row(int64_t t) const { return s + t * n_blocks; }
  const int16_t* bsums_row(int64_t t) const { return bsums + t * (n_in / 16); }
};

// Owns the storage; grow-only so repeated decode calls do not allocate.
class ActBuffer {
 public:
  ActQ8& reserve(ActKind kind, int64_t n_tokens, int64_t n_in);

 private:
  std::vector<uint8_t> bytes_;
  ActQ8 view_;
};

// Quantize x: [n_tokens, n_in] into a (storage from `buf`). n_in must be a multiple of
// the block size (32 or 256). Parallel over tokens when n_tokens > 1.
const ActQ8& quantize_act(ActKind kind, const float* x, int64_t n_tokens, int64_t n_in,
                          ActBuffer& buf, ThreadPool* pool);

// Single-row quantizers (exposed for tests).
void quantize_row_q8_32(const float* x, int64_t n_in, bool fp16_sum, int8_t* qs, float* d,
                        float* s);  // x: [n_in]
void quantize_row_q8_k(const float* x, int64_t n_in, int8_t* qs, float* d,
                       int16_t* bsums);  // x: [n_in]

}  // namespace tkv::kernels
