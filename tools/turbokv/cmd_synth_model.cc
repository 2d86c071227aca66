// turbokv synth-model: writes a GGUF of a chosen architecture and shape with
// random weights (model/synth_model.h), for speed work at shapes no real model
// file here has. Speed only: never report quality (KL, perplexity) from it.
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "model/synth_model.h"
#include "tools/turbokv/commands.h"

namespace tkv::cli {
namespace {
struct SynthArgs {
  std::string out, arch, preset, type = "q4_0", tokenizer;
  int layers = 0, d_model = 0, heads = 0, kv_heads = 0, head_dim = 0, ff = 0;
  int64_t ctx = 0, window = 0;
  float rope_theta = 0;
  uint64_t seed = 0;
};

// Preset first, explicit flags over it; 0 = not given.
Result<model::SynthSpec> make_spec(const SynthArgs& a) {
  model::SynthSpec s;
  if (!a.preset.empty()) {
    const model::SynthPreset* p = nullptr;
    std::string names;
    for (const auto& q : model::synth_presets()) {
      names += (names.empty() ? "" : ", ") + std::string(q.name);
      if (a.preset == q.name) p = &q;
    }
    if (!p) return invalid_argument("[synth] unknown --preset '{}' (valid: {})", a.preset, names);
    s = p->spec;
  } else if (a.layers == 0 || a.d_model == 0 || a.heads == 0 || a.ff == 0) {
    return invalid_argument(
        "[synth] without --preset, --layers, --d-model, --heads and --ff are required");
  }
  if (!a.arch.empty()) s.arch = a.arch;
  if (a.arch == "gemma3" && a.rope_theta == 0) s.rope_theta = 1e6f;  // Gemma 3's global base
  auto over = [](auto& dst, auto v) {
    if (v != 0) dst = v;
  };
  over(s.n_layers, a.layers);
  over(s.d_model, a.d_model);
  over(s.n_heads, a.heads);
  over(s.n_kv_heads, a.kv_heads);
  over(s.head_dim, a.head_dim);
  over(s.d_ff, a.ff);
  over(s.n_ctx, a.ctx);
  over(s.rope_theta, a.rope_theta);
  if (s.n_kv_heads == 0) s.n_kv_heads = s.n_heads;
  if (s.head_dim == 0 && s.n_heads > 0) s.head_dim = s.d_model / s.n_heads;
  if (s.n_ctx == 0) s.n_ctx = 4096;
  s.sliding_window = a.window != 0 ? a.window : std::min<int64_t>(1024, s.n_ctx);
  s.seed = a.seed;
  TKV_ASSIGN_OR_RETURN(s.type, model::parse_weight_type(a.type));
  s.tokenizer_path = a.tokenizer.empty() ? default_model_path() : a.tokenizer;
  return s;
}

int run_synth(const SynthArgs& a) {
  auto spec = make_spec(a);
  if (!spec.ok()) {
    std::fprintf(stderr, "error: %s\n", spec.status().message().c_str());
    return 1;
  }
  const model::SynthSpec& s = spec.value();
  const bool tty = isatty(STDERR_FILENO) != 0;
  int last_pct = -1;
  auto progress = [&](uint64_t done, uint64_t total) {
    const int pct = total ? static_cast<int>(100 * done / total) : 100;
    if (!tty || pct == last_pct) return;
    last_pct = pct;
    std::fprintf(stderr, "\rwriting %s: %3d%% of %.2f GiB", a.out.c_str(), pct,
                 static_cast<double>(total) / (1 << 30));
    std::fflush(stderr);
  };
  auto r = model::write_synth_model(s, a.out, progress);
  if (tty && last_pct >= 0) std::fprintf(stderr, "\n");
  if (!r.ok()) {
    std::fprintf(stderr, "error: %s\n", r.status().message().c_str());
    return 1;
  }
  std::printf(
      "wrote %s: synthetic %s, %d layers, d_model %d, heads %d/%d, head_dim %d, d_ff %d, ctx %lld, "
      "n_vocab %lld (tokenizer of %s), %s weights, %zu tensors, %.2f GiB of data, seed %llu\n",
      a.out.c_str(), s.arch.c_str(), s.n_layers, s.d_model, s.n_heads, s.n_kv_heads, s.head_dim,
      s.d_ff, static_cast<long long>(s.n_ctx), static_cast<long long>(r.value().n_vocab),
      s.tokenizer_path.c_str(), std::string(ggml::traits(s.type).name).c_str(), r.value().n_tensors,
      static_cast<double>(r.value().data_bytes) / (1 << 30),
      static_cast<unsigned long long>(s.seed));
  std::printf("random weights: for speed measurements only, never for quality\n");
  return 0;
}
}  // namespace

RunFn add_synth_model(CLI::App& app) {
  auto a = std::make_shared<SynthArgs>();
  CLI::App* c = app.add_subcommand(
      "synth-model",
      "Write a GGUF of a given shape with random weights (speed work only: never report "
      "quality from it). n_vocab and the tokenizer come from --tokenizer-from.");
  c->add_option("-o,--output", a->out, "Output GGUF (written as FILE.tmp, then renamed)")
      ->required();
  c->add_option("--preset", a->preset,
                "Named shape: llama3-8b (32 layers, d_model 4096, 32/8 heads, head_dim 128, "
                "d_ff 14336, rope theta 500000, ctx 131072); explicit flags override it");
  c->add_option("--arch", a->arch, "llama | qwen2 | gemma3 (default: the preset's, else llama)")
      ->check(CLI::IsMember({"llama", "qwen2", "gemma3"}));
  c->add_option("--layers", a->layers, "Layers")->check(int_range("--layers", 1, kNoMax));
  c->add_option("--d-model", a->d_model, "Model width")->check(int_range("--d-model", 1, kNoMax));
  c->add_option("--heads", a->heads, "Query heads")->check(int_range("--heads", 1, kNoMax));
  c->add_option("--kv-heads", a->kv_heads, "KV heads (default: --heads); must divide --heads")
      ->check(int_range("--kv-heads", 1, kNoMax));
  c->add_option("--head-dim", a->head_dim,
                "Head dim (default: d_model / heads; heads x head-dim != d_model: gemma3 only)")
      ->check(int_range("--head-dim", 1, kNoMax));
  c->add_option("--ff", a->ff, "FFN width (d_ff)")->check(int_range("--ff", 1, kNoMax));
  c->add_option("--ctx", a->ctx, "Trained context length written to the file (default 4096)")
      ->check(int_range("--ctx", 1, kNoMax));
  c->add_option("--rope-theta", a->rope_theta,
                "Rope base (default: the preset's, 1e6 for gemma3, else 10000)");
  c->add_option("--window", a->window,
                "gemma3: sliding window of the local layers (default: 1024, or --ctx if smaller)")
      ->check(int_range("--window", 1, kNoMax));
  c->add_option("--type", a->type,
                "Weight matrices' type: " + model::weight_type_names() +
                    " (case-insensitive; norms and biases stay f32)");
  c->add_option("--seed", a->seed, "RNG seed (each tensor: seed ^ hash(name); reproducible)");
  c->add_option("--tokenizer-from", a->tokenizer,
                "GGUF whose tokenizer.* keys are copied; n_vocab comes from this tokenizer "
                "(default: the default model, SmolLM2, in the model cache)");
  return [a] { return run_synth(*a); };
}

}  // namespace tkv::cli
