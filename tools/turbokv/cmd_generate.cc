// turbokv generate: a prompt in, tokens streamed to stdout, speed and KV bytes at the end.
#include <cstdio>

#include "tools/turbokv/commands.h"

namespace tkv::cli {
namespace {
struct GenerateArgs {
  CommonOptions common;
  std::string prompt = "Once upon a time";
  int n_predict = 128;
  bool chat = false;
  std::string system;
  sampling::SamplerParams sp;
};
}  // namespace

static int run_generate(GenerateArgs& a) {
  auto eng = make_engine(a.common);
  if (!eng) return 1;
  const auto& tok = eng->tokenizer();
  std::string text = a.prompt;
  if (a.chat) {
    std::vector<tok::ChatMessage> msgs;
    if (!a.system.empty()) msgs.push_back({"system", a.system});
    msgs.push_back({"user", a.prompt});
    auto r = tok.apply_chat_template(msgs, true);
    if (!r.ok()) {
      std::fprintf(stderr, "error: %s\n", r.status().message().c_str());
      return 1;
    }
    text = r.value();
  }
  const std::vector<int32_t> ids = tok.encode(text, /*add_special=*/true, /*parse_special=*/true);
  auto seq = eng->cache().create_seq();
  if (!seq.ok()) {
    std::fprintf(stderr, "error: %s\n", seq.status().message().c_str());
    return 1;
  }
  if (!a.chat) std::fputs(a.prompt.c_str(), stdout);
  auto st = eng->generate(
      seq.value(), ids, a.n_predict, a.sp,
      [](int32_t, const std::string& piece) {
        std::fwrite(piece.data(), 1, piece.size(), stdout);
        std::fflush(stdout);
        return true;
      },
      progress_bar);
  std::fputs("\n", stdout);
  if (!st.ok()) {
    std::fprintf(stderr, "error: %s\n", st.status().message().c_str());
    return 1;
  }
  const auto& s = st.value();
  const auto& kv = eng->cache();
  const int64_t n_ctx = kv.seq_len(seq.value());
  const double gbs =
      s.decode_tok_s() * static_cast<double>(eng->model().weight_bytes_per_token()) / 1e9;
  std::fprintf(
      stderr,
      "\n[turbokv] prefill %lld tok at %.1f tok/s | decode %lld tok at %.1f tok/s (%.1f GB/s of "
      "weights)\n"
      "[turbokv] kv cache %s: %zu B/token, %.2f MiB for %lld tokens (%.2f MiB allocated)\n",
      static_cast<long long>(s.prompt_tokens), s.prefill_tok_s(),
      static_cast<long long>(s.gen_tokens), s.decode_tok_s(), gbs, kv.scheme_name().c_str(),
      kv.bytes_per_token(),
      static_cast<double>(kv.bytes_per_token()) * static_cast<double>(n_ctx) / (1024.0 * 1024.0),
      static_cast<long long>(n_ctx), static_cast<double>(kv.allocated_bytes()) / (1024.0 * 1024.0));
  if (const kv::AttnCheck c = kv.attn_check(); c.calls > 0)
    std::fprintf(stderr,
                 "[turbokv] --kv-attn verify: %lld attention calls, max |fused - reference| %.3g "
                 "(max |out| %.3g, "
                 "worst call relative %.3g)\n",
                 static_cast<long long>(c.calls), c.max_abs_err, c.max_abs_out, c.max_rel_err);
  return 0;
}

RunFn add_generate(CLI::App& app) {
  auto a = std::make_shared<GenerateArgs>();
  CLI::App* sub = app.add_subcommand("generate", "Generate text from a prompt");
  add_common_options(sub, a->common);
  add_sampling_options(sub, a->sp);
  sub->add_option("-p,--prompt", a->prompt, "Prompt text");
  sub->add_option("-n,--n-predict", a->n_predict, "Tokens to generate")
      ->check(CLI::NonNegativeNumber);
  sub->add_flag("--chat", a->chat, "Wrap the prompt in the model's chat template");
  sub->add_option("--system", a->system, "System message (with --chat)");
  return [a] { return run_generate(*a); };
}

}  // namespace tkv::cli
