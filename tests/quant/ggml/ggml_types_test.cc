// GGML type traits: ids, names, block geometry (vs the block structs and
// ggml.c type_traits[]), row_bytes, and unknown ids.
#include <gtest/gtest.h>

#include "quant/ggml_blocks.h"
#include "quant/ggml_types.h"

namespace tkv::ggml {
namespace {

TEST(GgmlTypes, TraitsMatchGgml) {
  struct Want {
    uint32_t id;
    const char* name;
    int elems;
    int bytes;
  };
  // Values of ggml.c type_traits[] (blck_size, type_size, type_name).
  const Want want[] = {{0, "f32", 1, 4},       {1, "f16", 1, 2},       {2, "q4_0", 32, 18},
                       {3, "q4_1", 32, 20},    {6, "q5_0", 32, 22},    {7, "q5_1", 32, 24},
                       {8, "q8_0", 32, 34},    {9, "q8_1", 32, 36},    {10, "q2_K", 256, 84},
                       {11, "q3_K", 256, 110}, {12, "q4_K", 256, 144}, {13, "q5_K", 256, 176},
                       {14, "q6_K", 256, 210}, {15, "q8_K", 256, 292}, {30, "bf16", 1, 2}};
  for (const Want& w : want) {
    const TypeTraits* t = type_traits(w.id);
    ASSERT_NE(t, nullptr) << "id " << w.id;
    EXPECT_EQ(static_cast<uint32_t>(t->type), w.id);
    EXPECT_EQ(t->name, w.name);
    EXPECT_EQ(t->block_elems, w.elems) << w.name;
    EXPECT_EQ(t->block_bytes, w.bytes) << w.name;
  }
  EXPECT_EQ(traits(Type::kQ4_K).block_bytes, static_cast<int>(sizeof(BlockQ4_K)));
  EXPECT_FALSE(traits(Type::kQ8_1).supported);
  EXPECT_TRUE(traits(Type::kQ6_K).supported);
}

TEST(GgmlTypes, UnknownIds) {
  for (uint32_t id : {4u, 5u, 16u, 29u, 31u, 39u, 1000u, 0xffffffffu})
    EXPECT_EQ(type_traits(id), nullptr) << id;
}

TEST(GgmlTypes, RowBytes) {
  EXPECT_EQ(row_bytes(Type::kF32, 7), 28u);
  EXPECT_EQ(row_bytes(Type::kBF16, 3), 6u);
  EXPECT_EQ(row_bytes(Type::kQ4_0, 64), 36u);
  EXPECT_EQ(row_bytes(Type::kQ6_K, 2048), 8u * 210u);
  EXPECT_EQ(row_bytes(Type::kQ8_0, 0), 0u);
}

TEST(GgmlTypesDeathTest, RowBytesNotMultipleOfBlock) {
  EXPECT_DEATH((void)row_bytes(Type::kQ4_K, 100), "TKV_CHECK");
}

}  // namespace
}  // namespace tkv::ggml
