// Random cache contents for the benchmark, made on the device (a counter hash,
// no curand): data planes random bytes, fp16 scales in [2^-7, 2^-6), integer zeros.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace tkv::bench {

// bytes[i] = hash(seed, i) & 0xff.
cudaError_t fill_random_bytes(uint8_t* p, int64_t n, uint32_t seed);
// Random bf16 values ~ U(-2, 2).
cudaError_t fill_random_bf16(uint16_t* p, int64_t n, uint32_t seed);
// Valid fp16 scales in [2^-7, 2^-6) (zero_like: integers in [-8, 7]).
cudaError_t fill_random_f16(uint16_t* p, int64_t n, uint32_t seed, bool zero_like);
// Random fp32 values ~ U(-2, 2).
cudaError_t fill_random_f32(float* p, int64_t n, uint32_t seed);

// Reads n bytes (n a multiple of 16) and writes one word (never taken: keeps the loads
// live): evicts L2 with clean lines, unlike a memset, whose dirty lines would be
// written back during the next timed kernel.
cudaError_t flush_l2_by_reads(const void* p, int64_t n, uint32_t* sink);

}  // namespace tkv::bench
