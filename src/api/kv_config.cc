// KvConfig (include/turbokv/kv_config.h): the typed --kv-quant, parsed by the
// one scheme parser (quant::parse_kv_scheme) with kvcache's error text.
#include "turbokv/kv_config.h"

#include <fmt/format.h>

#include "kvcache/kv_cache.h"
#include "quant/kv_scheme.h"
#include "runtime/kv_auto.h"

namespace turbokv {

Result<KvConfig> KvConfig::parse(std::string_view text) {
  if (tkv::runtime::is_auto_kv_scheme(text)) {
    KvConfig c;
    c.kind = Kind::kAuto;
    c.key_bits = c.value_bits = 0;
    if (text != "auto") {
      TKV_ASSIGN_OR_RETURN(c.auto_bits, tkv::runtime::auto_kv_budget(text));
      // A budget some scheme fits (the fallback table's smallest takes 3.75 bits).
      TKV_RETURN_IF_ERROR(tkv::runtime::pick_auto_kv_scheme(c.auto_bits, "", 128).status());
    }
    return c;
  }
  TKV_ASSIGN_OR_RETURN(const tkv::quant::KvScheme s, tkv::kv::parse_kv_quant(text));
  KvConfig c;
  switch (s.kind) {
    case tkv::quant::KvKind::kBf16:
      c.kind = Kind::kBf16;
      break;
    case tkv::quant::KvKind::kF16:
      c.kind = Kind::kF16;
      break;
    case tkv::quant::KvKind::kAffine:
      c.kind = Kind::kAffine;
      break;
    case tkv::quant::KvKind::kTurbo:
      c.kind = Kind::kTurbo;
      break;
  }
  c.key_bits = s.k_bits;
  c.value_bits = s.v_bits;
  c.rotated_keys = s.k_rotated;
  c.symmetric_keys = s.k_symmetric;
  c.fitted_value_scale = s.v_mse_scale;
  c.absmax_values = s.v_absmax;
  return c;
}

std::string KvConfig::to_string() const {
  switch (kind) {
    case Kind::kBf16:
      return "bf16";
    case Kind::kF16:
      return "f16";
    case Kind::kAffine:
      return std::to_string(key_bits);
    case Kind::kTurbo:
      return "turbo:k" + std::to_string(key_bits) + (symmetric_keys ? "s" : "") +
             (rotated_keys ? "r" : "") + "v" + std::to_string(value_bits) +
             (fitted_value_scale ? "m"
              : absmax_values    ? "a"
                                 : "");
    case Kind::kAuto:
      return auto_bits > 0 ? fmt::format("auto:{}", auto_bits) : "auto";
  }
  return "?";
}

}  // namespace turbokv
