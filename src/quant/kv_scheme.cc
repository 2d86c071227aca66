// KvScheme validation, parsing and row layout (see kv_scheme.h, docs/kv-format.md).
// Turbo sizes follow vllm-metal cache_policy.py::turboquant_page_size_bytes per row:
// D*kb/8 + D*vb/8 + 3 fp16 arrays of D/32; affine stores 2 fp16 arrays per tensor per 64-group.
#include "quant/kv_scheme.h"

#include <charconv>

#include "base/check.h"
#include "quant/turbo_tables.h"

namespace tkv::quant {
namespace {

constexpr std::string_view kValidForms =
    "bf16 | f16 | 8 | 4 | turbo (= turbo:k8v3) | turbo:k<K>v<V> with K in {2,4,5,8}, V in "
    "{2,3,4,5,8} | turbo:k<K>[s][r]v<V>[m]: s symmetric keys (K in {4,5,8}, no zero point), "
    "r keys rotated; V suffix m: MSE-fitted value scale, a: absmax-anchored value codebook (V in "
    "{2,3,4,5}) (turbo:k4srv4a) | auto[:BITS] (the best measured "
    "scheme within BITS bits per element, "
    "default 6.25)";

bool in_set(int v, std::initializer_list<int> set) {
  for (int s : set)
    if (s == v) return true;
  return false;
}

bool parse_int(std::string_view s, int* out) {
  if (s.empty()) return false;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), *out);
  return r.ec == std::errc() && r.ptr == s.data() + s.size();
}

}  // namespace

Status validate_kv_scheme(const KvScheme& s) {
  if (!in_set(s.head_dim, {64, 128, 256, 512}))
    return invalid_argument("[kv] head_dim {} is not supported (valid: 64, 128, 256, 512)",
                            s.head_dim);
  switch (s.kind) {
    case KvKind::kBf16:
    case KvKind::kF16:
      if (s.k_bits != 16 || s.v_bits != 16)
        return invalid_argument("[kv] {} scheme needs k_bits = v_bits = 16, got k{} v{}",
                                s.kind == KvKind::kF16 ? "f16" : "bf16", s.k_bits, s.v_bits);
      break;
    case KvKind::kAffine:
      if (!in_set(s.k_bits, {4, 8}))
        return invalid_argument("[kv] affine k_bits {} invalid (valid: 4, 8)", s.k_bits);
      if (!in_set(s.v_bits, {4, 8}))
        return invalid_argument("[kv] affine v_bits {} invalid (valid: 4, 8)", s.v_bits);
      break;
    case KvKind::kTurbo:
      if (!in_set(s.k_bits, {2, 3, 4, 5, 8}))
        return invalid_argument("[kv] turbo k_bits {} invalid (valid: 2, 3, 4, 5, 8)", s.k_bits);
      if (!in_set(s.v_bits, {1, 2, 3, 4, 5, 8}))
        return invalid_argument("[kv] turbo v_bits {} invalid (valid: 1, 2, 3, 4, 5, 8)", s.v_bits);
      break;
    default:
      return invalid_argument("[kv] unknown scheme kind {}", (int)s.kind);
  }
  if (s.k_rotated && s.kind != KvKind::kTurbo && s.kind != KvKind::kBf16)
    return invalid_argument("[kv] rotated keys need a turbo or bf16 scheme");
  if (s.v_mse_scale && s.kind != KvKind::kTurbo)
    return invalid_argument("[kv] the MSE-fitted value scale (suffix m) needs a turbo scheme");
  if (s.k_symmetric && (s.kind != KvKind::kTurbo || !in_set(s.k_bits, {4, 5, 8})))
    return invalid_argument(
        "[kv] symmetric keys (s) need a turbo scheme with k_bits 4, 5 or 8 (got "
        "k_bits {})",
        s.k_bits);
  if (s.v_absmax && (s.kind != KvKind::kTurbo || !in_set(s.v_bits, {2, 3, 4, 5})))
    return invalid_argument(
        "[kv] the absmax value codebook (suffix a) needs a turbo scheme with "
        "v_bits 2, 3, 4 or 5 (got v_bits {})",
        s.v_bits);
  if (s.v_absmax && s.v_mse_scale)
    return invalid_argument(
        "[kv] value suffixes m and a exclude each other (a fits its scale too)");
  if (s.k_symmetric && s.k_unsigned8)
    return invalid_argument("[kv] symmetric keys (s) and k_unsigned8 exclude each other");
  if (s.k_unsigned8 && (s.kind != KvKind::kTurbo || s.k_bits != 8))
    return invalid_argument("[kv] k_unsigned8 needs a turbo scheme with k_bits 8 (got k_bits {})",
                            s.k_bits);
  return Status::ok_status();
}

Result<KvScheme> parse_kv_scheme(std::string_view text, int head_dim) {
  KvScheme s;
  s.head_dim = head_dim;
  int k = 0, v = 0;
  if (text == "bf16") {
    s = {KvKind::kBf16, 16, 16, head_dim};
  } else if (text == "f16") {
    s = {KvKind::kF16, 16, 16, head_dim};
  } else if (text == "8" || text == "4") {
    const int b = text[0] - '0';
    s = {KvKind::kAffine, b, b, head_dim};
  } else if (text == "turbo") {
    s = {KvKind::kTurbo, 8, 3, head_dim};
  } else if (text.starts_with("turbo:k") && text.find('v') != std::string_view::npos) {
    // turbo:k<K>[s][r]v<V>[m]: s symmetric keys, r rotated keys, m the fitted V scale
    std::string_view kb = text.substr(7, text.find('v') - 7);
    const bool rotated = kb.ends_with('r');
    if (rotated) kb.remove_suffix(1);
    const bool symmetric = kb.ends_with('s');
    if (symmetric) kb.remove_suffix(1);
    std::string_view vb = text.substr(text.find('v') + 1);
    const bool mse = vb.ends_with('m');
    if (mse) vb.remove_suffix(1);
    const bool absmax = !mse && vb.ends_with('a');
    if (absmax) vb.remove_suffix(1);
    if (!(parse_int(kb, &k) && parse_int(vb, &v) && in_set(k, {2, 4, 5, 8}) &&
          in_set(v, {2, 3, 4, 5, 8})))
      return invalid_argument("[kv] unknown KV cache type '{}' (valid: {})", text, kValidForms);
    s = {KvKind::kTurbo, k, v, head_dim};
    s.k_rotated = rotated;
    s.v_mse_scale = mse;
    s.k_symmetric = symmetric;
    s.v_absmax = absmax;
  } else {
    return invalid_argument("[kv] unknown KV cache type '{}' (valid: {})", text, kValidForms);
  }
  TKV_RETURN_IF_ERROR(validate_kv_scheme(s));
  return s;
}

std::string kv_scheme_name(const KvScheme& s) {
  switch (s.kind) {
    case KvKind::kBf16:
      return "bf16";
    case KvKind::kF16:
      return "f16";
    case KvKind::kAffine:
      return s.k_bits == s.v_bits ? fmt::format("affine{}", s.k_bits)
                                  : fmt::format("affine:k{}v{}", s.k_bits, s.v_bits);
    case KvKind::kTurbo:
      return fmt::format("turbo:k{}{}{}{}v{}{}", s.k_bits, s.k_unsigned8 ? "u" : "",
                         s.k_symmetric ? "s" : "", s.k_rotated ? "r" : "", s.v_bits,
                         s.v_mse_scale ? "m"
                         : s.v_absmax  ? "a"
                                       : "");
  }
  return "?";
}

const float* turbo_value_centroids(const KvScheme& s) {
  return s.v_absmax ? turbo_absmax_centroids(s.v_bits) : turbo_centroids(s.v_bits);
}

const float* turbo_value_boundaries(const KvScheme& s) {
  return s.v_absmax ? turbo_absmax_boundaries(s.v_bits) : turbo_boundaries(s.v_bits);
}

KvRowLayout kv_row_layout(const KvScheme& s) {
  TKV_CHECK(validate_kv_scheme(s).ok());
  return kv_row_layout_of(s);
}

int64_t kv_bytes_per_token_per_head(const KvScheme& s) {
  return kv_row_layout(s).row_bytes;
}

double kv_bits_per_element(const KvScheme& s) {
  return 8.0 * (double)kv_bytes_per_token_per_head(s) / (2.0 * s.head_dim);
}

double kv_compression_vs_fp16(const KvScheme& s) {
  return 4.0 * s.head_dim / (double)kv_bytes_per_token_per_head(s);
}

}  // namespace tkv::quant
