// Architecture registry and the shared hparams reader.
#include "model/registry.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "io/gguf.h"

namespace tkv::model {
namespace {
std::map<std::string, ArchSpec>& table() {
  static std::map<std::string, ArchSpec> t;
  return t;
}
}  // namespace

void register_arch(const ArchSpec& spec) {
  table()[spec.name] = spec;
}

const ArchSpec* find_arch(const std::string& name) {
  auto it = table().find(name);
  return it == table().end() ? nullptr : &it->second;
}

std::vector<std::string> registered_archs() {
  std::vector<std::string> out;
  for (auto& [k, v] : table()) out.push_back(k);
  return out;
}

namespace {
// An optional integer key in [lo, hi]; `def` when absent. A wrong type or an
// out-of-range value is an error naming the key, never a silent cast.
Status read_int(const io::GgufFile& g, const std::string& key, int64_t lo, int64_t hi, int64_t def,
                int64_t* dst, bool required = false) {
  if (g.find(key) == nullptr) {
    if (required) return invalid_argument("[model] {}: missing '{}'", g.path(), key);
    *dst = def;
    return Status();
  }
  auto r = g.get_u64(key);
  if (!r.ok())
    return invalid_argument("[model] {}: invalid '{}': {}", g.path(), key, r.status().message());
  if (r.value() < static_cast<uint64_t>(lo) || r.value() > static_cast<uint64_t>(hi))
    return invalid_argument("[model] {}: '{}' = {} out of range [{}, {}]", g.path(), key, r.value(),
                            lo, hi);
  *dst = static_cast<int64_t>(r.value());
  return Status();
}

Status read_int(const io::GgufFile& g, const std::string& key, int64_t lo, int64_t hi, int64_t def,
                int* dst, bool required = false) {
  int64_t v = 0;
  TKV_RETURN_IF_ERROR(read_int(g, key, lo, hi, def, &v, required));
  *dst = static_cast<int>(v);
  return Status();
}

// An optional float key; NaN/inf are rejected by validate_config.
Status read_float(const io::GgufFile& g, const std::string& key, double def, float* dst) {
  if (g.find(key) == nullptr) {
    *dst = static_cast<float>(def);
    return Status();
  }
  auto r = g.get_f64(key);
  if (!r.ok())
    return invalid_argument("[model] {}: invalid '{}': {}", g.path(), key, r.status().message());
  const double v = r.value();
  // Out-of-range double -> float is undefined; map it to inf for the range check.
  *dst = std::isfinite(v) && std::fabs(v) <= 3.0e38 ? static_cast<float>(v)
                                                    : std::numeric_limits<float>::infinity();
  return Status();
}
}  // namespace

Status read_common_hparams(const io::GgufFile& g, const std::string& a, ModelConfig& cfg) {
  cfg.arch = a;
  cfg.name = g.get_string_or("general.name", a);
  const std::string p = a + ".";
  TKV_RETURN_IF_ERROR(read_int(g, p + "block_count", 1, kMaxLayers, 0, &cfg.n_layers, true));
  TKV_RETURN_IF_ERROR(read_int(g, p + "embedding_length", 1, kMaxDim, 0, &cfg.d_model, true));
  TKV_RETURN_IF_ERROR(read_int(g, p + "feed_forward_length", 1, kMaxDim, 0, &cfg.d_ff, true));
  TKV_RETURN_IF_ERROR(read_int(g, p + "attention.head_count", 1, kMaxHeads, 0, &cfg.n_heads, true));
  TKV_RETURN_IF_ERROR(
      read_int(g, p + "attention.head_count_kv", 1, kMaxHeads, cfg.n_heads, &cfg.n_kv_heads));
  if (g.find(p + "attention.key_length") == nullptr && cfg.d_model % cfg.n_heads != 0)
    return invalid_argument(
        "[model] {}: embedding_length {} is not a multiple of head_count {} (and no key_length)",
        g.path(), cfg.d_model, cfg.n_heads);
  TKV_RETURN_IF_ERROR(read_int(g, p + "attention.key_length", 1, kMaxHeadDim,
                               cfg.d_model / cfg.n_heads, &cfg.head_dim));
  int v_len = 0;
  TKV_RETURN_IF_ERROR(
      read_int(g, p + "attention.value_length", 1, kMaxHeadDim, cfg.head_dim, &v_len));
  if (v_len != cfg.head_dim)
    return invalid_argument("[model] {}: value_length {} != key_length {} is not supported",
                            g.path(), v_len, cfg.head_dim);
  TKV_RETURN_IF_ERROR(read_float(g, p + "attention.layer_norm_rms_epsilon", 1e-5, &cfg.rms_eps));
  TKV_RETURN_IF_ERROR(read_int(g, p + "context_length", 1, kMaxContext, 2048, &cfg.n_ctx_train));
  TKV_RETURN_IF_ERROR(
      read_int(g, p + "rope.dimension_count", 0, INT32_MAX, cfg.head_dim, &cfg.n_rot));
  float base = 0;
  TKV_RETURN_IF_ERROR(read_float(g, p + "rope.freq_base", 10000.0, &base));
  cfg.layer_rope_base.assign(static_cast<size_t>(cfg.n_layers), base);
  cfg.layer_window.assign(static_cast<size_t>(cfg.n_layers), 0);
  if (g.find(p + "vocab_size") != nullptr) {
    TKV_RETURN_IF_ERROR(read_int(g, p + "vocab_size", 1, kMaxVocab, 0, &cfg.n_vocab));
  } else {
    auto toks = g.find("tokenizer.ggml.tokens");
    const size_t n = toks ? toks->array_len : 0;
    if (n == 0 || n > static_cast<size_t>(kMaxVocab))
      return invalid_argument("[model] {}: vocabulary size {} out of range [1, {}]", g.path(), n,
                              kMaxVocab);
    cfg.n_vocab = static_cast<int>(n);
  }
  return Status();
}

Status read_int_key(const io::GgufFile& g, const std::string& key, int64_t lo, int64_t hi,
                    int64_t def, int64_t* dst) {
  return read_int(g, key, lo, hi, def, dst);
}

Status read_float_key(const io::GgufFile& g, const std::string& key, double def, float* dst) {
  return read_float(g, key, def, dst);
}

}  // namespace tkv::model
