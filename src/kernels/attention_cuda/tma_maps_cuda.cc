// Host side of the TMA tensor maps (tma_maps.h): the driver's cuTensorMapEncodeTiled
// found through the runtime, the map of a page plane, and a per-thread cache of maps.
// Built only with TKV_CUDA (src/kernels/CMakeLists.txt).
#include "kernels/attention_cuda/tma_maps.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <functional>
#include <unordered_map>

namespace tkv::kernels::cuda_detail {
namespace {

// cuTensorMapEncodeTiled through the runtime's driver entry point (no libcuda link).
using EncodeTiledFn = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*,
                                   const cuuint64_t*, const cuuint64_t*, const cuuint32_t*,
                                   const cuuint32_t*, CUtensorMapInterleave, CUtensorMapSwizzle,
                                   CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

EncodeTiledFn encode_tiled_fn() {
  static const EncodeTiledFn fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
    const cudaError_t e = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000,
                                                           cudaEnableDefault, &q);
    if (e != cudaSuccess)
      (void)cudaGetLastError();  // not sticky; keep it out of the launch's error
    return e == cudaSuccess && q == cudaDriverEntryPointSuccess ? reinterpret_cast<EncodeTiledFn>(f)
                                                                : nullptr;
  }();
  return fn;
}

// A plane of head-major pages [page][kv head][offset][row_bytes] as uint8 {row_bytes,
// page_size, page * n_kv + kv head}, box box_bytes x box_rows consecutive rows of one (page, kv
// head). The (page, kv head) extent is not in PagedKv, and every box the kernel issues lies inside
// a mapped page, so the map spans int32 coordinates (capped at 2^41 bytes).
bool encode_rows(EncodeTiledFn fn, CUtensorMap* m, const void* base, int row_bytes, int page_size,
                 int box_rows, CUtensorMapSwizzle sw, int box_bytes) {
  const cuuint64_t block = (cuuint64_t)row_bytes * page_size;  // bytes of one (page, kv head)
  const cuuint64_t n_blocks = std::min<cuuint64_t>(0x7fffffffu, (cuuint64_t(1) << 41) / block);
  const cuuint64_t dims[3] = {(cuuint64_t)row_bytes, (cuuint64_t)page_size, n_blocks};
  const cuuint64_t strides[2] = {(cuuint64_t)row_bytes, block};
  const cuuint32_t box[3] = {(cuuint32_t)box_bytes, (cuuint32_t)box_rows, 1}, es[3] = {1, 1, 1};
  return fn(m, CU_TENSOR_MAP_DATA_TYPE_UINT8, 3, const_cast<void*>(base), dims, strides, box, es,
            CU_TENSOR_MAP_INTERLEAVE_NONE, sw, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

// encode_rows through a per-thread cache: a map depends only on (base, row bytes, page
// size, box rows, swizzle, box bytes), so a cache plane reuses its maps on every decode step (the
// encode is host work of a few microseconds on the launch path). Bounded: cleared past 4096 maps.
bool cached_rows(EncodeTiledFn fn, CUtensorMap* m, const void* base, int row_bytes, int page_size,
                 int box_rows, CUtensorMapSwizzle sw, int box_bytes) {
  struct Key {
    const void* base;
    int row_bytes, page_size, box_rows, sw, box_bytes;
    bool operator==(const Key& o) const {
      return base == o.base && row_bytes == o.row_bytes && page_size == o.page_size &&
             box_rows == o.box_rows && sw == o.sw && box_bytes == o.box_bytes;
    }
  };
  struct Hash {
    size_t operator()(const Key& k) const {
      return std::hash<const void*>()(k.base) ^ ((size_t)k.row_bytes << 40) ^
             ((size_t)k.page_size << 20) ^ ((size_t)k.box_rows << 8) ^ ((size_t)k.box_bytes << 52) ^
             k.sw;
    }
  };
  thread_local std::unordered_map<Key, CUtensorMap, Hash> cache;
  const Key key{base, row_bytes, page_size, box_rows, (int)sw, box_bytes};
  if (const auto it = cache.find(key); it != cache.end()) {
    *m = it->second;
    return true;
  }
  if (!encode_rows(fn, m, base, row_bytes, page_size, box_rows, sw, box_bytes)) return false;
  if (cache.size() >= 4096) cache.clear();
  cache.emplace(key, *m);
  return true;
}

}  // namespace

bool paged_rows_map(CUtensorMap* m, const void* base, int row_bytes, int page_size, int box_rows,
                    CUtensorMapSwizzle sw, int box_bytes) {
  const EncodeTiledFn fn = encode_tiled_fn();
  return fn && cached_rows(fn, m, base, row_bytes, page_size, box_rows, sw, box_bytes);
}

}  // namespace tkv::kernels::cuda_detail
