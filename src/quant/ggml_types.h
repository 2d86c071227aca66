// GGML tensor types as stored in GGUF: ids, block sizes, bytes per block, and
// the POD block structs. The id values are the GGUF on-disk ids.
// Reference: ggml/include/ggml.h (enum ggml_type), ggml-common.h (block layouts).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace tkv::ggml {

enum class Type : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kBF16 = 30,
};

struct TypeTraits {
  Type type;
  std::string_view name;
  int block_elems;  // elements per block (1 for float types)
  int block_bytes;  // bytes per block
  bool supported;   // we can dequantize / matmul it
};

// Traits for a raw id; nullptr for an id we do not know (the GGUF reader
// turns that into an error naming the id).
const TypeTraits* type_traits(uint32_t id);
inline const TypeTraits& traits(Type t) {
  return *type_traits(static_cast<uint32_t>(t));
}
// Bytes of a row of n elements (n must be a multiple of block_elems).
size_t row_bytes(Type t, int64_t n);

}  // namespace tkv::ggml
