// KV codec kernels: encode fp32 K/V rows [n_tokens, n_kv_heads, head_dim] into a
// scheme's planes (bf16, affine, TurboQuant), and dequantize them back (V also in
// the rotated domain, leaving the un-rotation to attention). The bit layouts live in
// src/quant (turbo_k.h, turbo_v.h, affine_kv.h); _ref.cc is the scalar oracle,
// _cpu.cc the AVX-512/AVX2 + threads path, bit-identical to it.
#pragma once
#include <cstdint>

#include "quant/kv_scheme.h"

namespace tkv {
class ThreadPool;
}

namespace tkv::kernels {

// One plane of per-row data: row r starts at data + r * row_stride_bytes.
struct KvPlane {
  void* data = nullptr;
  int64_t row_stride_bytes = 0;
};

// The planes of one scheme (quant::KvRowLayout gives their per-row sizes).
// bf16: k_data/v_data hold bf16 [head_dim]; turbo: v_zero unused; affine: all six.
struct KvPlanes {
  KvPlane k_data;   // [n_rows, k_data_bytes]  packed K indices (or bf16)
  KvPlane v_data;   // [n_rows, v_data_bytes]  packed V indices (or bf16)
  KvPlane k_scale;  // [n_rows, n_groups] fp16
  KvPlane k_zero;   // [n_rows, n_groups] fp16 (turbo zero-point, affine bias)
  KvPlane v_scale;  // [n_rows, n_groups] fp16
  KvPlane v_zero;   // [n_rows, n_groups] fp16 (affine bias only)
};

// All planes inside one interleaved row of layout.row_bytes: rows [n_rows, row_bytes].
KvPlanes kv_planes_interleaved(void* rows, const quant::KvRowLayout& layout);
// Each plane dense on its own ([n_rows, plane bytes]); null where the scheme has none.
KvPlanes kv_planes_separate(const quant::KvRowLayout& layout, void* k_data, void* v_data,
                            void* k_scale, void* k_zero, void* v_scale, void* v_zero);

struct KvEncodeParams {
  quant::KvScheme scheme;    // must be valid
  int64_t n_rows = 0;        // n_tokens * n_kv_heads
  const float* k = nullptr;  // [n_tokens, n_kv_heads, head_dim]; null skips K
  const float* v = nullptr;  // [n_tokens, n_kv_heads, head_dim]; null skips V
  KvPlanes out;
};

struct KvDequantParams {
  quant::KvScheme scheme;  // must be valid
  int64_t n_rows = 0;
  KvPlanes in;
  float* k = nullptr;      // [n_tokens, n_kv_heads, head_dim]; null skips K
  float* v = nullptr;      // [n_tokens, n_kv_heads, head_dim]; null skips V
  bool v_rotated = false;  // turbo: c[idx]*scale, no inverse FWHT (other kinds ignore it)
};

// Scalar reference (the oracle).
void kvcodec_encode_ref(const KvEncodeParams& p);
void kvcodec_dequant_ref(const KvDequantParams& p);
// In place: rows of rotated-domain V -> original domain (sign ⊙ H(.)/√D).
void turbo_v_unrotate_ref(float* x /*[n_rows, head_dim]*/, int64_t n_rows, int head_dim);

// SIMD + threads; pool null = ThreadPool::global(). Bit-identical to _ref.
void kvcodec_encode_cpu(const KvEncodeParams& p, ThreadPool* pool = nullptr);
void kvcodec_dequant_cpu(const KvDequantParams& p, ThreadPool* pool = nullptr);
void turbo_v_unrotate_cpu(float* x /*[n_rows, head_dim]*/, int64_t n_rows, int head_dim,
                          ThreadPool* pool = nullptr);

// ISA of the CPU path: auto (best supported), or forced for tests/benchmarks.
enum class KvCpuIsa { kAuto, kAvx2, kAvx512 };
// Returns false (and changes nothing) if the machine lacks the ISA.
bool kvcodec_cpu_set_isa(KvCpuIsa isa);
const char* kvcodec_cpu_isa_name();

}  // namespace tkv::kernels
