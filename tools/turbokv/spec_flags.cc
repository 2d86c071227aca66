// --spec, --spec-max and --draft-model (generate, chat): speculative decoding's
// flags, checked before the model loads. The draft-model drafter is not built
// yet: the flag is refused with a pointer to --spec ngram.
#include "tools/turbokv/commands.h"

namespace tkv::cli {

void add_spec_options(CLI::App* app, SpecFlags& f) {
  app->add_option("--spec", f.kind,
                  "Speculative decoding: none (default) | ngram (prompt lookup: continue an "
                  "earlier occurrence of the last tokens)")
      ->check(CLI::IsMember({"none", "ngram"}));
  app->add_option("--spec-max", f.max_draft,
                  "Most draft tokens verified per step (adapted to the acceptance rate)")
      ->check(int_range("--spec-max", 1, 32));
  app->add_option("--draft-model", f.draft_model,
                  "Draft model with the target's tokenizer (not yet: use --spec ngram)");
}

bool finish_spec(CLI::App* sub, const SpecFlags& f, turbokv::SpecParams* out) {
  if (!f.draft_model.empty()) {
    std::fprintf(stderr,
                 "error: --draft-model is not supported yet (speculative decoding with a draft "
                 "model is planned); use --spec ngram\n");
    return false;
  }
  *out = turbokv::SpecParams{};
  if (f.kind == "none") {
    warn_no_effect(sub, "--spec-max", "without --spec ngram");
    return true;
  }
  out->kind = turbokv::SpecKind::kNgram;
  out->max_draft = f.max_draft;
  return true;
}

}  // namespace tkv::cli
