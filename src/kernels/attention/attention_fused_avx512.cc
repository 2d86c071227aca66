// AVX-512 (16-lane) build of the fused attention inner loop; every function
// carries the target attribute, attention_fused_cpu.cc calls it only when the
// CPU reports AVX-512 F/BW/VL/DQ/VBMI/VNNI.
// (Built with -Wno-uninitialized: GCC 12 flags the _mm512_undefined_* placeholders
// inside its own intrinsic headers once inlined, see src/kernels/CMakeLists.txt.)
#define TKV_FUSED_NS avx512
#define TKV_TGT TKV_FUSED_TGT512
#include "kernels/attention/attention_fused_kernels.inc"
