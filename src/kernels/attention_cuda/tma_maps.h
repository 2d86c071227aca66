// Internal (CUDA builds): TMA tensor maps of the paged cache's planes for the tensor-core
// decode (decode_turbo_mma_cuda.cu). Host code; nvcc and the host compiler both include it.
#pragma once
#include <cuda.h>  // CUtensorMap and its enums (the encode function comes from the runtime's driver entry point)

namespace tkv::kernels::cuda_detail {

// The map of one plane of head-major pages [page][kv head][offset][row_bytes] as uint8
// {row_bytes, page_size, page * n_kv_heads + kv head}, box box_bytes (<= row_bytes; 128 at
// most with the 128-byte swizzle) x box_rows (16 or 64, <= page_size) consecutive rows of one
// (page, kv head), with swizzle sw. Cached per thread on (base, row bytes, page size, box
// bytes, box rows, swizzle). False when the driver's encode entry point is missing or the
// encode fails.
bool paged_rows_map(CUtensorMap* m, const void* base, int row_bytes, int page_size, int box_rows,
                    CUtensorMapSwizzle sw, int box_bytes);

}  // namespace tkv::kernels::cuda_detail
