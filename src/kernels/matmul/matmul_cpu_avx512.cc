// AVX-512 VNNI build of the CPU matmul row kernels (vpdpbusd / vpdpwssd on
// 256-bit vectors, 32 vector registers). Every function carries the target
// attribute; matmul_cpu.cc picks it only when __builtin_cpu_supports says so.
#define TKV_ISA_NS avx512
#define TKV_TGT_STR "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni"
#define TKV_VNNI 1
#include "kernels/matmul/matmul_cpu_kernels.inc"
