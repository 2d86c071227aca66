// --spec, --spec-max and --draft-model (generate, chat, serve; bench: --spec
// ngram only): speculative decoding's flags, checked before the model loads.
#include <filesystem>

#include "tools/turbokv/commands.h"

namespace tkv::cli {

void add_spec_options(CLI::App* app, SpecFlags& f) {
  app->add_option("--spec", f.kind,
                  "Speculative decoding: none (default) | ngram (prompt lookup: continue an "
                  "earlier occurrence of the last tokens) | draft (a draft model guesses; "
                  "implied by --draft-model)")
      ->check(CLI::IsMember({"none", "ngram", "draft"}));
  app->add_option("--spec-max", f.max_draft,
                  "Most draft tokens verified per step (adapted to the acceptance rate)")
      ->check(int_range("--spec-max", 1, 32));
  app->add_option("--draft-model", f.draft_model,
                  "Draft model for speculative decoding: a smaller GGUF (or short name) with "
                  "this model's tokenizer; its KV cache uses --kv-quant");
}

bool finish_spec(CLI::App* sub, const SpecFlags& f, turbokv::SpecParams* out,
                 CommonOptions* common) {
  *out = turbokv::SpecParams{};
  std::string kind = f.kind;
  if (!f.draft_model.empty()) {
    if (common == nullptr) {
      std::fprintf(stderr, "error: --draft-model is not supported here (generate, chat, serve)\n");
      return false;
    }
    if (kind == "ngram") {
      std::fprintf(stderr, "error: --spec ngram and --draft-model: choose one drafter\n");
      return false;
    }
    auto path = resolve_model(f.draft_model);
    if (!path.ok()) {
      std::fprintf(stderr, "error: --draft-model: %s\n", path.status().message().c_str());
      return false;
    }
    if (!std::filesystem::is_regular_file(path.value())) {
      std::fprintf(stderr, "error: --draft-model: no such file: %s\n", path.value().c_str());
      return false;
    }
    common->draft_model = path.value();
    kind = "draft";
  } else if (kind == "draft") {
    std::fprintf(stderr, "error: --spec draft needs --draft-model PATH\n");
    return false;
  }
  if (kind == "none") {
    warn_no_effect(sub, "--spec-max", "without --spec");
    return true;
  }
  out->kind = kind == "ngram" ? turbokv::SpecKind::kNgram : turbokv::SpecKind::kDraft;
  out->max_draft = f.max_draft;
  return true;
}

}  // namespace tkv::cli
