// Compile-only CUDA sanity kernel for the KV codec: it instantiates every inline
// TKV_HD codec function from src/quant on the device, so the cuda-release preset
// proves the format headers are __host__ __device__ clean. One thread per row; the
// real CUDA encode/decode kernels (warp per group) come with the CUDA attention work.
#include <cstdint>

#include "quant/affine_kv.h"
#include "quant/turbo_v.h"

namespace tkv::kernels {

__global__ void kvcodec_sanity_kernel(const float* k /*[n_rows, d]*/, const float* v /*[n_rows, d]*/, int n_rows,
                                      int d, int k_bits, int v_bits, const float* sign /*[d]*/, float inv_sqrt,
                                      const float* boundaries /*[2^v_bits-1]*/, const float* centroids /*[2^v_bits]*/,
                                      uint8_t* k_packed /*[n_rows, d*k_bits/8]*/, uint16_t* k_scale /*[n_rows, d/32]*/,
                                      uint16_t* k_zero /*[n_rows, d/32]*/, uint8_t* v_packed /*[n_rows, d*v_bits/8]*/,
                                      uint16_t* v_scale /*[n_rows, d/32]*/, float* k_out /*[n_rows, d]*/,
                                      float* v_out /*[n_rows, d]*/) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= n_rows || d > 512) return;
  float scratch[512];
  const bool is_signed = k_bits == 8;
  uint8_t* kp = k_packed + (int64_t)r * d * k_bits / 8;
  uint8_t* vp = v_packed + (int64_t)r * d * v_bits / 8;
  uint16_t* ks = k_scale + (int64_t)r * d / 32;
  uint16_t* kz = k_zero + (int64_t)r * d / 32;
  uint16_t* vs = v_scale + (int64_t)r * d / 32;
  quant::turbo_k_encode_row(k + (int64_t)r * d, d, k_bits, is_signed, kp, ks, kz);
  quant::turbo_k_dequant_row(kp, ks, kz, d, k_bits, is_signed, k_out + (int64_t)r * d);
  quant::turbo_v_encode_row(v + (int64_t)r * d, d, v_bits, sign, inv_sqrt, boundaries, scratch, vp, vs);
  quant::turbo_v_dequant_row(vp, vs, d, v_bits, centroids, sign, inv_sqrt, v_out + (int64_t)r * d);
  quant::turbo_v_dequant_rotated_row(vp, vs, d, v_bits, centroids, scratch);
  if (k_bits >= 4) {  // affine 4-bit (d/2 bytes, d/64 groups) fits in this row's K planes
    quant::affine_encode_row(scratch, d, 4, kp, ks, kz);
    quant::affine_dequant_row(kp, ks, kz, d, 4, k_out + (int64_t)r * d);
  }
}

}  // namespace tkv::kernels
