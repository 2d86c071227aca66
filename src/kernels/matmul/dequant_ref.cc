// Reference dequantization of GGUF weight rows to fp32 and the embedding
// gather built on it. Loops over the per-block functions of quant/ggml_dequant.h
// (the single definition of each layout); ggml's dequantize_row_* is the spec.
#include <cstring>

#include "base/check.h"
#include "kernels/matmul/matmul.h"
#include "quant/ggml_blocks.h"
#include "quant/ggml_dequant.h"

namespace tkv::kernels {
namespace {

template <typename Block>
void dequantize_blocks(const void* src, float* dst, int64_t n,
                       int block_elems) {  // src: [n / block_elems] blocks
  TKV_CHECK(n % block_elems == 0);
  const Block* b = static_cast<const Block*>(src);
  for (int64_t i = 0; i < n / block_elems; ++i) ggml::dequantize_block(b[i], dst + i * block_elems);
}

void dequantize_half(const void* src, float* dst, int64_t n,
                     bool bf16) {  // src: [n] fp16/bf16 bits
  const uint16_t* h = static_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < n; ++i)
    dst[i] = bf16 ? ggml::dequantize_bf16(h[i]) : ggml::dequantize_f16(h[i]);
}

}  // namespace

void dequantize_row(ggml::Type type, const void* src, float* dst, int64_t n) {
  using ggml::Type;
  switch (type) {
    case Type::kF32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case Type::kF16:
      dequantize_half(src, dst, n, false);
      return;
    case Type::kBF16:
      dequantize_half(src, dst, n, true);
      return;
    case Type::kQ4_0:
      dequantize_blocks<ggml::BlockQ4_0>(src, dst, n, ggml::kQK4_0);
      return;
    case Type::kQ4_1:
      dequantize_blocks<ggml::BlockQ4_1>(src, dst, n, ggml::kQK4_1);
      return;
    case Type::kQ5_0:
      dequantize_blocks<ggml::BlockQ5_0>(src, dst, n, ggml::kQK5_0);
      return;
    case Type::kQ5_1:
      dequantize_blocks<ggml::BlockQ5_1>(src, dst, n, ggml::kQK5_1);
      return;
    case Type::kQ8_0:
      dequantize_blocks<ggml::BlockQ8_0>(src, dst, n, ggml::kQK8_0);
      return;
    case Type::kQ2_K:
      dequantize_blocks<ggml::BlockQ2_K>(src, dst, n, ggml::kQK_K);
      return;
    case Type::kQ3_K:
      dequantize_blocks<ggml::BlockQ3_K>(src, dst, n, ggml::kQK_K);
      return;
    case Type::kQ4_K:
      dequantize_blocks<ggml::BlockQ4_K>(src, dst, n, ggml::kQK_K);
      return;
    case Type::kQ5_K:
      dequantize_blocks<ggml::BlockQ5_K>(src, dst, n, ggml::kQK_K);
      return;
    case Type::kQ6_K:
      dequantize_blocks<ggml::BlockQ6_K>(src, dst, n, ggml::kQK_K);
      return;
    case Type::kQ8_K:
      dequantize_blocks<ggml::BlockQ8_K>(src, dst, n, ggml::kQK_K);
      return;
    case Type::kQ8_1:
      break;  // no to_float in ggml: only an activation format
  }
  TKV_CHECK_MSG(false, "[matmul] dequantize_row: unsupported ggml type");
}

void get_rows(const WeightView& w, const int32_t* ids, int64_t n_ids,
              float* dst) {  // ids: [n_ids], dst: [n_ids, n_in]
  const size_t row_bytes = ggml::row_bytes(w.type, w.n_in);
  const uint8_t* base = static_cast<const uint8_t*>(w.data);
  for (int64_t i = 0; i < n_ids; ++i) {
    TKV_CHECK(ids[i] >= 0 && ids[i] < w.n_out);
    dequantize_row(w.type, base + static_cast<size_t>(ids[i]) * row_bytes, dst + i * w.n_in,
                   w.n_in);
  }
}

}  // namespace tkv::kernels
