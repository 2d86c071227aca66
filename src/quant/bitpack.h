// LSB-first bitstream shared by TurboQuant K and V and the affine KV scheme
// (spec turboquant-codec.md §1.5): element i occupies bits [i*b, i*b+b) of the
// row's byte stream, LSB-first within a byte, bytes little-endian; b in 1..8,
// so an element straddles at most two bytes (b = 3, 5). b = 8 is a plain copy.
#pragma once
#include <cstdint>

#include "quant/half.h"

namespace tkv::quant {

// Bytes of a packed stream of n elements of `bits` each (n*bits % 8 == 0).
TKV_HD constexpr int bitpack_bytes(int n, int bits) {
  return n * bits / 8;
}

// Element i of the stream (value in [0, 2^bits)).
TKV_HD uint32_t bitpack_get(const uint8_t* in /*[n*bits/8]*/, int i, int bits) {
  const int bit = i * bits, byte = bit >> 3, sh = bit & 7;
  uint32_t w = in[byte];
  if (sh + bits > 8) w |= (uint32_t)in[byte + 1] << 8;
  return (w >> sh) & ((1u << bits) - 1u);
}

// Packs n values (each masked to `bits`) into out; n*bits must be a multiple of 8.
TKV_HD void bitpack_pack(const uint8_t* idx /*[n]*/, int n, int bits, uint8_t* out /*[n*bits/8]*/) {
  const int n_bytes = bitpack_bytes(n, bits);
  if (bits == 8) {
    for (int i = 0; i < n; ++i) out[i] = idx[i];
    return;
  }
  for (int j = 0; j < n_bytes; ++j) out[j] = 0;
  const uint32_t mask = (1u << bits) - 1u;
  for (int i = 0; i < n; ++i) {
    const int bit = i * bits, byte = bit >> 3, sh = bit & 7;
    const uint32_t v = ((uint32_t)idx[i] & mask) << sh;
    out[byte] = (uint8_t)(out[byte] | (v & 0xffu));
    if (sh + bits > 8) out[byte + 1] = (uint8_t)(out[byte + 1] | (v >> 8));
  }
}

// Inverse of bitpack_pack.
TKV_HD void bitpack_unpack(const uint8_t* in /*[n*bits/8]*/, int n, int bits,
                           uint8_t* idx /*[n]*/) {
  for (int i = 0; i < n; ++i) idx[i] = (uint8_t)bitpack_get(in, i, bits);
}

}  // namespace tkv::quant
