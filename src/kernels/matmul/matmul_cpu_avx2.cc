// AVX2 build of the CPU matmul row kernels (maddubs + madd integer dots): the
// fallback for CPUs without AVX-512 VNNI. Body: matmul_cpu_kernels.inc.
#define TKV_ISA_NS avx2
#define TKV_TGT_STR "avx2,fma,f16c"
#define TKV_VNNI 0
#include "kernels/matmul/matmul_cpu_kernels.inc"
