// Architecture registry and the shared hparams reader.
#include "model/registry.h"

#include <algorithm>
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

Status read_common_hparams(const io::GgufFile& g, const std::string& a, ModelConfig& cfg) {
  auto need_int = [&](const std::string& key, int& dst) -> Status {
    auto r = g.get_u64(a + "." + key);
    if (!r.ok())
      return invalid_argument("[model] {}: missing or invalid '{}.{}': {}", g.path(), a, key,
                              r.status().message());
    if (r.value() == 0 || r.value() > (1u << 24))
      return invalid_argument("[model] {}: '{}.{}' = {} out of range", g.path(), a, key, r.value());
    dst = static_cast<int>(r.value());
    return Status();
  };
  cfg.arch = a;
  cfg.name = g.get_string_or("general.name", a);
  TKV_RETURN_IF_ERROR(need_int("block_count", cfg.n_layers));
  TKV_RETURN_IF_ERROR(need_int("embedding_length", cfg.d_model));
  TKV_RETURN_IF_ERROR(need_int("feed_forward_length", cfg.d_ff));
  TKV_RETURN_IF_ERROR(need_int("attention.head_count", cfg.n_heads));
  cfg.n_kv_heads = static_cast<int>(
      g.get_u64_or(a + ".attention.head_count_kv", static_cast<uint64_t>(cfg.n_heads)));
  cfg.head_dim = static_cast<int>(
      g.get_u64_or(a + ".attention.key_length", static_cast<uint64_t>(cfg.d_model / cfg.n_heads)));
  if (cfg.n_kv_heads <= 0 || cfg.n_heads % cfg.n_kv_heads != 0)
    return invalid_argument("[model] {}: head_count {} is not a multiple of head_count_kv {}",
                            g.path(), cfg.n_heads, cfg.n_kv_heads);
  const uint64_t v_len =
      g.get_u64_or(a + ".attention.value_length", static_cast<uint64_t>(cfg.head_dim));
  if (static_cast<int>(v_len) != cfg.head_dim)
    return invalid_argument("[model] {}: value_length {} != key_length {} is not supported",
                            g.path(), v_len, cfg.head_dim);
  cfg.rms_eps = static_cast<float>(g.get_f64_or(a + ".attention.layer_norm_rms_epsilon", 1e-5));
  cfg.n_ctx_train = static_cast<int64_t>(g.get_u64_or(a + ".context_length", 2048));
  cfg.n_rot = static_cast<int>(
      g.get_u64_or(a + ".rope.dimension_count", static_cast<uint64_t>(cfg.head_dim)));
  const float base = static_cast<float>(g.get_f64_or(a + ".rope.freq_base", 10000.0));
  cfg.layer_rope_base.assign(static_cast<size_t>(cfg.n_layers), base);
  cfg.layer_window.assign(static_cast<size_t>(cfg.n_layers), 0);
  auto n_vocab = g.get_u64(a + ".vocab_size");
  if (n_vocab.ok()) {
    cfg.n_vocab = static_cast<int>(n_vocab.value());
  } else {
    auto toks = g.find("tokenizer.ggml.tokens");
    cfg.n_vocab = toks ? static_cast<int>(toks->array_len) : 0;
  }
  return Status();
}

}  // namespace tkv::model
