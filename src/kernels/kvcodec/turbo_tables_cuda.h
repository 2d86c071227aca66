// Device-memory copies of the TurboQuant tables (the host arrays of
// quant/turbo_tables.h, not a second definition), uploaded once per process on
// first use to the current device. Only in builds with TKV_CUDA=ON.
#pragma once

namespace tkv::kernels {

// [head_dim] +-1.0f signs on the device, or nullptr (bad head_dim, upload failed).
const float* turbo_signs_cuda(int head_dim);
// [2^v_bits] centroids / [2^v_bits - 1] boundaries on the device, or nullptr.
const float* turbo_centroids_cuda(int v_bits);
const float* turbo_boundaries_cuda(int v_bits);

}  // namespace tkv::kernels
