// write_synth_model (see synth_model.h): spec checks, metadata in llama.cpp's
// key names, the tokenizer copied from a real GGUF, and tensors streamed from a
// per-tensor seeded RNG (seed ^ hash(name)), so a file is reproducible and no
// tensor is ever held whole in memory.
#include "model/synth_model.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <memory>
#include <optional>

#include "io/gguf.h"
#include "model/config.h"
#include "quant/ggml_synth.h"

namespace tkv::model {
namespace {

// Every type RandomBlocks can write, in the order --help lists them.
constexpr ggml::Type kWeightTypes[] = {
    ggml::Type::kF32,  ggml::Type::kF16,  ggml::Type::kBF16, ggml::Type::kQ4_0, ggml::Type::kQ4_1,
    ggml::Type::kQ5_0, ggml::Type::kQ5_1, ggml::Type::kQ8_0, ggml::Type::kQ2_K, ggml::Type::kQ3_K,
    ggml::Type::kQ4_K, ggml::Type::kQ5_K, ggml::Type::kQ6_K};

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

// One tensor to write: random weights of `type` with std `sigma`, or a constant.
struct Plan {
  std::string name;
  std::vector<int64_t> shape;
  ggml::Type type;
  float sigma;  // > 0: random; 0: every element = value (f32)
  float value = 1.0f;
};

std::vector<Plan> tensor_plan(const SynthSpec& s, int64_t n_vocab) {
  const int64_t d = s.d_model, q = int64_t{s.n_heads} * s.head_dim,
                kv = int64_t{s.n_kv_heads} * s.head_dim, ff = s.d_ff;
  const bool gemma = s.arch == "gemma3";
  const ggml::Type w = s.type, f32 = ggml::Type::kF32;
  auto sd = [](int64_t n_in) { return 1.0f / std::sqrt(static_cast<float>(n_in)); };
  std::vector<Plan> p;
  // Gemma multiplies embeddings by sqrt(d_model): unit rows after that.
  p.push_back({"token_embd.weight", {d, n_vocab}, w, gemma ? sd(d) : 1.0f});
  p.push_back({"output_norm.weight", {d}, f32, 0});
  if (!gemma) p.push_back({"output.weight", {d, n_vocab}, w, sd(d)});  // Gemma ties them
  for (int il = 0; il < s.n_layers; ++il) {
    const std::string b = "blk." + std::to_string(il) + ".";
    p.push_back({b + "attn_norm.weight", {d}, f32, 0});
    p.push_back({b + "attn_q.weight", {d, q}, w, sd(d)});
    p.push_back({b + "attn_k.weight", {d, kv}, w, sd(d)});
    p.push_back({b + "attn_v.weight", {d, kv}, w, sd(d)});
    if (s.arch == "qwen2") {
      p.push_back({b + "attn_q.bias", {q}, f32, 0.1f});
      p.push_back({b + "attn_k.bias", {kv}, f32, 0.1f});
      p.push_back({b + "attn_v.bias", {kv}, f32, 0.1f});
    }
    if (gemma) {
      p.push_back({b + "attn_q_norm.weight", {s.head_dim}, f32, 0});
      p.push_back({b + "attn_k_norm.weight", {s.head_dim}, f32, 0});
    }
    p.push_back({b + "attn_output.weight", {q, d}, w, sd(q)});
    if (gemma) p.push_back({b + "post_attention_norm.weight", {d}, f32, 0});
    p.push_back({b + "ffn_norm.weight", {d}, f32, 0});
    p.push_back({b + "ffn_gate.weight", {d, ff}, w, sd(d)});
    p.push_back({b + "ffn_up.weight", {d, ff}, w, sd(d)});
    p.push_back({b + "ffn_down.weight", {ff, d}, w, sd(ff)});
    if (gemma) p.push_back({b + "post_ffw_norm.weight", {d}, f32, 0});
  }
  return p;
}

void set_hparams(io::GgufWriter& g, const SynthSpec& s, int64_t n_vocab) {
  const std::string a = s.arch + ".";
  g.set_string("general.architecture", s.arch);
  const std::string label = s.label.empty() ? s.arch + " custom" : s.label;
  g.set_string("general.name", "synthetic " + label + " shape, random weights: speed only");
  g.set_bool("turbokv.synthetic", true);
  g.set_u64("turbokv.synthetic.seed", s.seed);
  g.set_u32(a + "block_count", static_cast<uint32_t>(s.n_layers));
  g.set_u32(a + "context_length", static_cast<uint32_t>(s.n_ctx));
  g.set_u32(a + "embedding_length", static_cast<uint32_t>(s.d_model));
  g.set_u32(a + "feed_forward_length", static_cast<uint32_t>(s.d_ff));
  g.set_u32(a + "attention.head_count", static_cast<uint32_t>(s.n_heads));
  g.set_u32(a + "attention.head_count_kv", static_cast<uint32_t>(s.n_kv_heads));
  g.set_u32(a + "attention.key_length", static_cast<uint32_t>(s.head_dim));
  g.set_u32(a + "attention.value_length", static_cast<uint32_t>(s.head_dim));
  g.set_u32(a + "rope.dimension_count", static_cast<uint32_t>(s.head_dim));
  g.set_f32(a + "rope.freq_base", s.rope_theta);
  g.set_f32(a + "attention.layer_norm_rms_epsilon", s.arch == "gemma3" ? 1e-6f : 1e-5f);
  g.set_u32(a + "vocab_size", static_cast<uint32_t>(n_vocab));
  if (s.arch == "gemma3")
    g.set_u32(a + "attention.sliding_window", static_cast<uint32_t>(s.sliding_window));
}

// Copies every tokenizer.* key; n_vocab is the token list's length.
Result<int64_t> copy_tokenizer(io::GgufWriter& g, const std::string& path) {
  TKV_ASSIGN_OR_RETURN(auto src, io::GgufFile::open(path));
  const io::GgufValue* toks = src->find("tokenizer.ggml.tokens");
  if (!toks || toks->type != io::GgufType::kArray || toks->array_len == 0)
    return invalid_argument("[synth] {}: no tokenizer.ggml.tokens to copy (--tokenizer-from)",
                            path);
  for (const auto& [key, value] : src->metadata()) {
    if (key.rfind("tokenizer.", 0) == 0) TKV_RETURN_IF_ERROR(g.set_value(key, value));
  }
  return static_cast<int64_t>(toks->array_len);
}

}  // namespace

const std::vector<SynthPreset>& synth_presets() {
  static const std::vector<SynthPreset> kPresets = [] {
    SynthSpec l8;
    l8.arch = "llama";
    l8.label = "llama3-8b";
    l8.n_layers = 32;
    l8.d_model = 4096;
    l8.n_heads = 32;
    l8.n_kv_heads = 8;
    l8.head_dim = 128;
    l8.d_ff = 14336;
    l8.n_ctx = 131072;
    l8.rope_theta = 500000.0f;
    return std::vector<SynthPreset>{{"llama3-8b", l8}};
  }();
  return kPresets;
}

std::string weight_type_names() {
  std::string out;
  for (ggml::Type t : kWeightTypes)
    out += (out.empty() ? "" : ", ") + std::string(ggml::traits(t).name);
  return out;
}

Result<ggml::Type> parse_weight_type(const std::string& name) {
  for (ggml::Type t : kWeightTypes) {
    if (lower(std::string(ggml::traits(t).name)) == lower(name)) return t;
  }
  return invalid_argument("[synth] unknown weight type '{}' (valid: {})", name,
                          weight_type_names());
}

Status check_synth_spec(const SynthSpec& s, int64_t n_vocab) {
  if (s.arch != "llama" && s.arch != "qwen2" && s.arch != "gemma3")
    return invalid_argument("[synth] --arch '{}' is not supported (valid: llama, qwen2, gemma3)",
                            s.arch);
  const auto in = [](int64_t v, int64_t lo, int64_t hi) { return v >= lo && v <= hi; };
  struct Bound {
    const char* flag;
    int64_t v, hi;
  };
  for (const Bound& b :
       {Bound{"--layers", s.n_layers, kMaxLayers}, Bound{"--d-model", s.d_model, kMaxDim},
        Bound{"--ff", s.d_ff, kMaxDim}, Bound{"--heads", s.n_heads, kMaxHeads},
        Bound{"--kv-heads", s.n_kv_heads, kMaxHeads}, Bound{"--head-dim", s.head_dim, kMaxHeadDim},
        Bound{"--ctx", s.n_ctx, std::min<int64_t>(kMaxContext, UINT32_MAX)}}) {
    if (!in(b.v, 1, b.hi))
      return invalid_argument("[synth] {} {} out of range [1, {}]", b.flag, b.v, b.hi);
  }
  if (!in(n_vocab, 1, kMaxVocab))
    return invalid_argument("[synth] tokenizer vocabulary {} out of range [1, {}]", n_vocab,
                            kMaxVocab);
  if (s.n_heads % s.n_kv_heads != 0)
    return invalid_argument("[synth] --kv-heads {} must divide --heads {}", s.n_kv_heads,
                            s.n_heads);
  const int64_t q_dim = int64_t{s.n_heads} * s.head_dim;
  if (s.arch != "gemma3" && q_dim != s.d_model)
    return invalid_argument(
        "[synth] --heads {} x --head-dim {} = {} must equal --d-model {} for {} (only gemma3 "
        "allows a different attention width)",
        s.n_heads, s.head_dim, q_dim, s.d_model, s.arch);
  if (s.head_dim % 2 != 0)
    return invalid_argument("[synth] --head-dim {} must be even (rope rotates pairs)", s.head_dim);
  if (!(s.rope_theta > 0) || !std::isfinite(s.rope_theta))
    return invalid_argument("[synth] --rope-theta {} must be finite and > 0", s.rope_theta);
  if (s.arch == "gemma3" && !in(s.sliding_window, 1, s.n_ctx))
    return invalid_argument("[synth] --window {} out of range [1, --ctx {}]", s.sliding_window,
                            s.n_ctx);
  if (!ggml::can_synthesize(s.type))
    return invalid_argument("[synth] type {} cannot be written (valid: {})",
                            ggml::traits(s.type).name, weight_type_names());
  const int block = ggml::traits(s.type).block_elems;
  for (const Bound& b : {Bound{"--d-model", s.d_model, 0}, Bound{"--heads x --head-dim", q_dim, 0},
                         Bound{"--ff", s.d_ff, 0}}) {
    if (b.v % block != 0)
      return invalid_argument(
          "[synth] {} {} is not a multiple of {}'s block of {} elements (a weight row length)",
          b.flag, b.v, ggml::traits(s.type).name, block);
  }
  return Status();
}

Result<SynthResult> write_synth_model(const SynthSpec& s, const std::string& path,
                                      const io::GgufWriter::ProgressFn& progress) {
  io::GgufWriter g;
  TKV_ASSIGN_OR_RETURN(const int64_t n_vocab, copy_tokenizer(g, s.tokenizer_path));
  TKV_RETURN_IF_ERROR(check_synth_spec(s, n_vocab));
  set_hparams(g, s, n_vocab);
  const std::vector<Plan> plan = tensor_plan(s, n_vocab);
  for (const Plan& t : plan) TKV_RETURN_IF_ERROR(g.add_tensor(t.name, t.shape, t.type));
  // Fill state of the tensor being written; reset when a tensor starts (offset 0).
  ggml::SplitMix64 rng{0};
  std::optional<ggml::RandomBlocks> blocks;
  auto fill = [&](size_t i, uint64_t offset, uint8_t* dst, size_t n) -> Status {
    const Plan& t = plan[i];
    const ggml::TypeTraits& tr = ggml::traits(t.type);
    if (t.sigma == 0) {  // constant f32 (norm weights)
      for (size_t k = 0; k < n; k += sizeof(float)) std::memcpy(dst + k, &t.value, sizeof(float));
      return Status();
    }
    if (offset == 0) {
      rng = ggml::SplitMix64{s.seed ^ fnv1a(t.name)};
      blocks.emplace(t.type, t.sigma);
    }
    blocks->fill(rng, dst, n / static_cast<size_t>(tr.block_bytes));
    return Status();
  };
  TKV_RETURN_IF_ERROR(g.write(path, fill, progress));
  SynthResult r;
  r.n_vocab = n_vocab;
  r.n_tensors = plan.size();
  r.data_bytes = g.data_bytes();
  return r;
}

}  // namespace tkv::model
