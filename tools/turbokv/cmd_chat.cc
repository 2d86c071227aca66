// turbokv chat: interactive conversation using the model's chat template. The
// KV cache keeps the conversation; each turn feeds only the new tokens.
#include <cstdio>
#include <iostream>

#include "tools/turbokv/commands.h"

namespace tkv::cli {
namespace {
struct ChatArgs {
  CommonOptions common;
  std::string system;
  int n_predict = 512;
  sampling::SamplerParams sp;
};

int run_chat(ChatArgs& a) {
  auto eng = make_engine(a.common);
  if (!eng) return 1;
  const auto& tok = eng->tokenizer();
  auto seq = eng->cache().create_seq();
  if (!seq.ok()) {
    std::fprintf(stderr, "error: %s\n", seq.status().message().c_str());
    return 1;
  }
  std::vector<tok::ChatMessage> msgs;
  if (!a.system.empty()) msgs.push_back({"system", a.system});
  std::string rendered;  // template text already fed to the model
  std::fprintf(stderr, "[turbokv] chat with %s (kv %s). Empty line or Ctrl-D quits.\n",
               eng->model().config().name.c_str(), eng->cache().scheme_name().c_str());
  std::string line;
  while (true) {
    std::fputs("\n> ", stdout);
    std::fflush(stdout);
    if (!std::getline(std::cin, line) || line.empty()) break;
    msgs.push_back({"user", line});
    auto full = tok.apply_chat_template(msgs, true);
    if (!full.ok()) {
      std::fprintf(stderr, "error: %s\n", full.status().message().c_str());
      return 1;
    }
    // Feed only the new suffix of the rendered conversation.
    const std::string suffix = full.value().substr(rendered.size());
    const auto ids = tok.encode(suffix, /*add_special=*/rendered.empty(), /*parse_special=*/true);
    std::string reply;
    auto st =
        eng->generate(seq.value(), ids, a.n_predict, a.sp, [&](int32_t, const std::string& piece) {
          reply += piece;
          std::fwrite(piece.data(), 1, piece.size(), stdout);
          std::fflush(stdout);
          return true;
        });
    if (!st.ok()) {
      std::fprintf(stderr, "\nerror: %s\n", st.status().message().c_str());
      return 1;
    }
    msgs.push_back({"assistant", reply});
    auto closed = tok.apply_chat_template(msgs, false);
    if (!closed.ok()) return 1;
    // The cache holds the prompt plus the generated tokens (minus the end-of-turn
    // marker); re-sync by trimming to the prompt and feeding the closed turn text.
    rendered = full.value();
    const int64_t keep =
        eng->cache().seq_len(seq.value()) - static_cast<int64_t>(st.value().decode_steps);
    eng->cache().trim_seq(seq.value(), keep);
    const std::string tail = closed.value().substr(rendered.size());
    std::vector<float> logits;
    auto tail_ids = tok.encode(tail, false, true);
    if (!tail_ids.empty()) {
      auto s2 = eng->prefill(seq.value(), tail_ids, &logits);
      if (!s2.ok()) {
        std::fprintf(stderr, "\nerror: %s\n", s2.message().c_str());
        return 1;
      }
    }
    rendered = closed.value();
    std::fprintf(stderr, "\n[%.1f tok/s]", st.value().decode_tok_s());
  }
  return 0;
}
}  // namespace

RunFn add_chat(CLI::App& app) {
  auto a = std::make_shared<ChatArgs>();
  CLI::App* sub = app.add_subcommand("chat", "Interactive chat using the model's chat template");
  add_common_options(sub, a->common);
  add_sampling_options(sub, a->sp);
  sub->add_option("--system", a->system, "System message");
  sub->add_option("-n,--n-predict", a->n_predict, "Max tokens per reply");
  return [a] { return run_chat(*a); };
}

}  // namespace tkv::cli
