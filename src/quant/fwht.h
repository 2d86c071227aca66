// Random-sign fast Walsh–Hadamard transform of the TurboQuant V codec (spec §2.1):
// forward y = H(x ⊙ sign)/√D, inverse x = sign ⊙ H(y)/√D, H the natural-order
// Sylvester matrix computed as radix-2 butterflies at stages s = 0..log2(D)-1
// (lower index a+b, upper a-b). Every vectorisation that keeps this pairing and
// stage order is bit-identical to this scalar form.
#pragma once
#include "quant/kv_math.h"

namespace tkv::quant {

// Unnormalised in-place H(x); n a power of two.
TKV_HD void fwht_stages(float* x /*[n]*/, int n) {
  for (int h = 1; h < n; h <<= 1) {
    for (int i = 0; i < n; i += 2 * h) {
      for (int j = i; j < i + h; ++j) {
        const float a = x[j], b = x[j + h];
        x[j] = add_rn(a, b);
        x[j + h] = add_rn(a, -b);
      }
    }
  }
}

// x <- H(x ⊙ sign) * inv_sqrt (the encoder's rotation).
TKV_HD void fwht_forward(float* x /*[n]*/, int n, const float* sign /*[n]*/, float inv_sqrt) {
  for (int i = 0; i < n; ++i) x[i] = mul_rn(x[i], sign[i]);
  fwht_stages(x, n);
  for (int i = 0; i < n; ++i) x[i] = mul_rn(x[i], inv_sqrt);
}

// x <- sign ⊙ H(x) * inv_sqrt (the deferred un-rotation; Metal multiplies by
// inv_sqrt*sign, which is the same bits because the sign flip is exact).
TKV_HD void fwht_inverse(float* x /*[n]*/, int n, const float* sign /*[n]*/, float inv_sqrt) {
  fwht_stages(x, n);
  for (int i = 0; i < n; ++i) x[i] = mul_rn(x[i], mul_rn(inv_sqrt, sign[i]));
}

}  // namespace tkv::quant
