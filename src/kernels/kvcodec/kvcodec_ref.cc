// Scalar reference of the KV codec kernels: a plain loop over rows calling the
// single definition of each format in src/quant. This is the oracle the SIMD path
// (kvcodec_cpu.cc) and future CUDA kernels are tested against, bit for bit.
#include "kernels/kvcodec/kvcodec.h"

#include "base/check.h"
#include "quant/affine_kv.h"
#include "quant/turbo_tables.h"
#include "quant/turbo_v.h"

namespace tkv::kernels {
namespace {

template <typename T>
T* row_ptr(const KvPlane& p, int64_t r) {
  return reinterpret_cast<T*>(static_cast<uint8_t*>(p.data) + r * p.row_stride_bytes);
}

void encode_row(const KvEncodeParams& p, int64_t r, float* scratch) {
  const quant::KvScheme& s = p.scheme;
  const int d = s.head_dim;
  const KvPlanes& o = p.out;
  const float* k = p.k ? p.k + r * d : nullptr;
  const float* v = p.v ? p.v + r * d : nullptr;
  switch (s.kind) {
    case quant::KvKind::kBf16:
      for (int i = 0; k && i < d; ++i)
        row_ptr<uint16_t>(o.k_data, r)[i] = quant::bf16_kv_encode(k[i]);
      for (int i = 0; v && i < d; ++i)
        row_ptr<uint16_t>(o.v_data, r)[i] = quant::bf16_kv_encode(v[i]);
      break;
    case quant::KvKind::kF16:
      for (int i = 0; k && i < d; ++i)
        row_ptr<uint16_t>(o.k_data, r)[i] = quant::f16_kv_encode(k[i]);
      for (int i = 0; v && i < d; ++i)
        row_ptr<uint16_t>(o.v_data, r)[i] = quant::f16_kv_encode(v[i]);
      break;
    case quant::KvKind::kAffine:
      if (k)
        quant::affine_encode_row(k, d, s.k_bits, row_ptr<uint8_t>(o.k_data, r),
                                 row_ptr<uint16_t>(o.k_scale, r), row_ptr<uint16_t>(o.k_zero, r));
      if (v)
        quant::affine_encode_row(v, d, s.v_bits, row_ptr<uint8_t>(o.v_data, r),
                                 row_ptr<uint16_t>(o.v_scale, r), row_ptr<uint16_t>(o.v_zero, r));
      break;
    case quant::KvKind::kTurbo:
      if (k && s.k_symmetric)
        quant::turbo_ks_encode_row(k, d, s.k_bits, row_ptr<uint8_t>(o.k_data, r),
                                   row_ptr<uint16_t>(o.k_scale, r));
      else if (k)
        quant::turbo_k_encode_row(k, d, s.k_bits, s.k_signed(), row_ptr<uint8_t>(o.k_data, r),
                                  row_ptr<uint16_t>(o.k_scale, r), row_ptr<uint16_t>(o.k_zero, r));
      if (v)
        quant::turbo_v_encode_row(
            v, d, s.v_bits, quant::turbo_signs(d), quant::turbo_inv_sqrt(d),
            quant::turbo_value_boundaries(s), scratch, row_ptr<uint8_t>(o.v_data, r),
            row_ptr<uint16_t>(o.v_scale, r),
            s.v_mse_scale || s.v_absmax ? quant::turbo_value_centroids(s) : nullptr, s.v_absmax);
      break;
  }
}

void dequant_row(const KvDequantParams& p, int64_t r) {
  const quant::KvScheme& s = p.scheme;
  const int d = s.head_dim;
  const KvPlanes& in = p.in;
  float* k = p.k ? p.k + r * d : nullptr;
  float* v = p.v ? p.v + r * d : nullptr;
  switch (s.kind) {
    case quant::KvKind::kBf16:
      for (int i = 0; k && i < d; ++i) k[i] = bf16_to_f32(row_ptr<uint16_t>(in.k_data, r)[i]);
      for (int i = 0; v && i < d; ++i) v[i] = bf16_to_f32(row_ptr<uint16_t>(in.v_data, r)[i]);
      break;
    case quant::KvKind::kF16:
      for (int i = 0; k && i < d; ++i) k[i] = f16_to_f32(row_ptr<uint16_t>(in.k_data, r)[i]);
      for (int i = 0; v && i < d; ++i) v[i] = f16_to_f32(row_ptr<uint16_t>(in.v_data, r)[i]);
      break;
    case quant::KvKind::kAffine:
      if (k)
        quant::affine_dequant_row(row_ptr<uint8_t>(in.k_data, r), row_ptr<uint16_t>(in.k_scale, r),
                                  row_ptr<uint16_t>(in.k_zero, r), d, s.k_bits, k);
      if (v)
        quant::affine_dequant_row(row_ptr<uint8_t>(in.v_data, r), row_ptr<uint16_t>(in.v_scale, r),
                                  row_ptr<uint16_t>(in.v_zero, r), d, s.v_bits, v);
      break;
    case quant::KvKind::kTurbo:
      if (k && s.k_symmetric)
        quant::turbo_ks_dequant_row(row_ptr<uint8_t>(in.k_data, r),
                                    row_ptr<uint16_t>(in.k_scale, r), d, s.k_bits, k);
      else if (k)
        quant::turbo_k_dequant_row(row_ptr<uint8_t>(in.k_data, r), row_ptr<uint16_t>(in.k_scale, r),
                                   row_ptr<uint16_t>(in.k_zero, r), d, s.k_bits, s.k_signed(), k);
      if (v && p.v_rotated) {
        quant::turbo_v_dequant_rotated_row(row_ptr<uint8_t>(in.v_data, r),
                                           row_ptr<uint16_t>(in.v_scale, r), d, s.v_bits,
                                           quant::turbo_value_centroids(s), v);
      } else if (v) {
        quant::turbo_v_dequant_row(row_ptr<uint8_t>(in.v_data, r), row_ptr<uint16_t>(in.v_scale, r),
                                   d, s.v_bits, quant::turbo_value_centroids(s),
                                   quant::turbo_signs(d), quant::turbo_inv_sqrt(d), v);
      }
      break;
  }
}

}  // namespace

KvPlanes kv_planes_interleaved(void* rows, const quant::KvRowLayout& l) {
  auto* base = static_cast<uint8_t*>(rows);
  const auto plane = [&](int64_t bytes, int64_t off) {
    return KvPlane{bytes ? base + off : nullptr, l.row_bytes};
  };
  return {plane(l.k_data_bytes, l.k_data_offset),   plane(l.v_data_bytes, l.v_data_offset),
          plane(l.k_scale_bytes, l.k_scale_offset), plane(l.k_zero_bytes, l.k_zero_offset),
          plane(l.v_scale_bytes, l.v_scale_offset), plane(l.v_zero_bytes, l.v_zero_offset)};
}

KvPlanes kv_planes_separate(const quant::KvRowLayout& l, void* k_data, void* v_data, void* k_scale,
                            void* k_zero, void* v_scale, void* v_zero) {
  return {{k_data, l.k_data_bytes}, {v_data, l.v_data_bytes},   {k_scale, l.k_scale_bytes},
          {k_zero, l.k_zero_bytes}, {v_scale, l.v_scale_bytes}, {v_zero, l.v_zero_bytes}};
}

void kvcodec_encode_ref(const KvEncodeParams& p) {
  TKV_CHECK(quant::validate_kv_scheme(p.scheme).ok());
  float scratch[512];
  for (int64_t r = 0; r < p.n_rows; ++r) encode_row(p, r, scratch);
}

void kvcodec_dequant_ref(const KvDequantParams& p) {
  TKV_CHECK(quant::validate_kv_scheme(p.scheme).ok());
  for (int64_t r = 0; r < p.n_rows; ++r) dequant_row(p, r);
}

void turbo_v_unrotate_ref(float* x, int64_t n_rows, int head_dim) {
  const float* sign = quant::turbo_signs(head_dim);
  TKV_CHECK(sign != nullptr);
  for (int64_t r = 0; r < n_rows; ++r)
    quant::fwht_inverse(x + r * head_dim, head_dim, sign, quant::turbo_inv_sqrt(head_dim));
}

}  // namespace tkv::kernels
