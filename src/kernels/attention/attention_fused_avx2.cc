// AVX2 (8-lane) build of the fused attention inner loop.
#define TKV_FUSED_NS avx2
#define TKV_TGT TKV_FUSED_TGT2
#include "kernels/attention/attention_fused_kernels.inc"
