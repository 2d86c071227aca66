// Type traits of the GGML weight types stored in GGUF: on-disk id, name,
// elements and bytes per block, and whether we can dequantize it.
// Reference: ggml/src/ggml.c type_traits[] (blck_size, type_size, type_name).
#include "quant/ggml_types.h"

#include "base/check.h"
#include "quant/ggml_blocks.h"

namespace tkv::ggml {
namespace {

// Q8_1 has no to_float in ggml either (it only feeds vec_dot), so it is known but unsupported.
constexpr TypeTraits kTraits[] = {
    {Type::kF32, "f32", 1, 4, true},
    {Type::kF16, "f16", 1, 2, true},
    {Type::kQ4_0, "q4_0", kQK4_0, sizeof(BlockQ4_0), true},
    {Type::kQ4_1, "q4_1", kQK4_1, sizeof(BlockQ4_1), true},
    {Type::kQ5_0, "q5_0", kQK5_0, sizeof(BlockQ5_0), true},
    {Type::kQ5_1, "q5_1", kQK5_1, sizeof(BlockQ5_1), true},
    {Type::kQ8_0, "q8_0", kQK8_0, sizeof(BlockQ8_0), true},
    {Type::kQ8_1, "q8_1", kQK8_1, sizeof(BlockQ8_1), false},
    {Type::kQ2_K, "q2_K", kQK_K, sizeof(BlockQ2_K), true},
    {Type::kQ3_K, "q3_K", kQK_K, sizeof(BlockQ3_K), true},
    {Type::kQ4_K, "q4_K", kQK_K, sizeof(BlockQ4_K), true},
    {Type::kQ5_K, "q5_K", kQK_K, sizeof(BlockQ5_K), true},
    {Type::kQ6_K, "q6_K", kQK_K, sizeof(BlockQ6_K), true},
    {Type::kQ8_K, "q8_K", kQK_K, sizeof(BlockQ8_K), true},
    {Type::kBF16, "bf16", 1, 2, true},
};

}  // namespace

const TypeTraits* type_traits(uint32_t id) {
  for (const TypeTraits& t : kTraits) {
    if (static_cast<uint32_t>(t.type) == id) return &t;
  }
  return nullptr;
}

size_t row_bytes(Type t, int64_t n) {
  const TypeTraits* tr = type_traits(static_cast<uint32_t>(t));
  TKV_CHECK(tr != nullptr);
  TKV_CHECK(n >= 0 && n % tr->block_elems == 0);
  return static_cast<size_t>(n / tr->block_elems) * static_cast<size_t>(tr->block_bytes);
}

}  // namespace tkv::ggml
