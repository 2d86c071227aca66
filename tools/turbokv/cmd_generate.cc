// turbokv generate: a prompt in, tokens streamed to stdout, speed and KV bytes at the
// end; through the public API (include/turbokv/), which also applies --stop.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "tools/turbokv/commands.h"

namespace tkv::cli {
namespace {
struct GenerateArgs {
  CommonOptions common;
  std::string prompt = "Once upon a time";
  std::string prompt_file;
  int n_predict = 128;
  bool chat = false;
  std::string system;
  std::vector<std::string> stops;
  turbokv::SamplingParams sp;
  SpecFlags spec_flags;
  turbokv::SpecParams spec;
  std::string save_session, load_session;  // KV snapshot files
  CLI::App* sub = nullptr;
};

// Flag checks before the model is loaded; false after printing the error.
bool check_flags(GenerateArgs& a) {
  if (!a.prompt_file.empty()) {
    std::ifstream in(a.prompt_file, std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "error: [generate] cannot read prompt file '%s'\n",
                   a.prompt_file.c_str());
      return false;
    }
    std::stringstream ss;
    ss << in.rdbuf();
    a.prompt = ss.str();
  }
  if (!a.chat) warn_no_effect(a.sub, "--system", "without --chat");
  return check_common(a.sub, a.common) && finish_sampling(a.sub, a.sp) &&
         finish_spec(a.sub, a.spec_flags, &a.spec, &a.common);
}

// Prompt text -> token ids, through the chat template with --chat.
Result<std::vector<int32_t>> prompt_tokens(const GenerateArgs& a, const turbokv::Tokenizer& tok) {
  std::string text = a.prompt;
  if (a.chat) {
    std::vector<turbokv::ChatMessage> msgs;
    if (!a.system.empty()) msgs.push_back({"system", a.system});
    msgs.push_back({"user", a.prompt});
    TKV_ASSIGN_OR_RETURN(text, tok.apply_chat_template(msgs, true));
  }
  return tok.encode(text, /*add_special=*/true, /*parse_special=*/true);
}

void print_timings(const turbokv::Engine& eng, const turbokv::Event& end) {
  const turbokv::Timings& t = end.timings;
  const double prefill_tok_s = t.prefill_ms > 0 ? t.prefill_tokens * 1000.0 / t.prefill_ms : 0;
  const double gbs =
      t.decode_tok_s() * static_cast<double>(eng.model_info().weight_bytes_per_token) / 1e9;
  std::fprintf(stderr,
               "\n[turbokv] finish: %s\n[turbokv] prefill %lld tok at %.1f tok/s | decode %lld tok "
               "at %.1f tok/s (%.1f GB/s of weights)\n",
               turbokv::finish_reason_name(end.finish), static_cast<long long>(t.prefill_tokens),
               prefill_tok_s, static_cast<long long>(t.generated_tokens), t.decode_tok_s(), gbs);
  if (t.cached_tokens > 0)
    std::fprintf(stderr, "[turbokv] %lld prompt tokens came from a cache (not prefilled)\n",
                 static_cast<long long>(t.cached_tokens));
  if (t.drafted_tokens > 0)
    std::fprintf(
        stderr, "[turbokv] speculation: %lld of %lld draft tokens accepted (%.0f%%)\n",
        static_cast<long long>(t.accepted_tokens), static_cast<long long>(t.drafted_tokens),
        100.0 * static_cast<double>(t.accepted_tokens) / static_cast<double>(t.drafted_tokens));
}
}  // namespace

static int run_generate(GenerateArgs& a) {
  if (!check_flags(a)) return 1;
  auto eng = make_api_engine(a.common);
  if (!eng) return 1;
  if (a.chat && !check_chat_template(*eng, a.common.model)) return 1;
  auto ids = prompt_tokens(a, eng->tokenizer());
  if (!ids.ok()) {
    std::fprintf(stderr, "error: %s\n", ids.status().message().c_str());
    return 1;
  }
  // Checked before any prefill: a prompt that cannot fit would fail only at the end.
  if (static_cast<int64_t>(ids.value().size()) > a.common.ctx) {
    std::fprintf(stderr,
                 "error: [generate] the prompt is %zu tokens, longer than the context (-c %lld); "
                 "raise -c or shorten the prompt\n",
                 ids.value().size(), static_cast<long long>(a.common.ctx));
    return 1;
  }
  turbokv::Request r;
  r.prompt_tokens = ids.value();
  r.sampling = a.sp;
  r.spec = a.spec;
  r.stop = a.stops;
  r.max_tokens = a.n_predict;
  r.on_prefill_progress = progress_bar;
  r.save_session = a.save_session;
  r.load_session = a.load_session;
  // Wall times seen from here (bench/scripts/run-persistence.sh reads them): submit
  // reads and checks a --load-session snapshot; the final event comes after the
  // --save-session write.
  using Clock = std::chrono::steady_clock;
  const auto ms = [](Clock::time_point a0, Clock::time_point b0) {
    return std::chrono::duration<double, std::milli>(b0 - a0).count();
  };
  const Clock::time_point t_submit = Clock::now();
  auto h = eng->submit(r);
  const Clock::time_point t_submitted = Clock::now();
  if (!h.ok()) {
    std::fprintf(stderr, "error: %s\n", h.status().message().c_str());
    return 1;
  }
  if (!a.chat) std::fputs(a.prompt.c_str(), stdout);
  turbokv::Event ev, end;
  Clock::time_point t_first{}, t_last = t_submitted, t_end = t_submitted;
  while (h.value().next(ev)) {
    std::fwrite(ev.text.data(), 1, ev.text.size(), stdout);
    std::fflush(stdout);
    if (ev.is_final()) {
      end = ev;
      t_end = Clock::now();
    } else {
      t_last = Clock::now();
      if (t_first == Clock::time_point{}) t_first = t_last;
    }
  }
  std::fputs("\n", stdout);
  if (end.finish == turbokv::FinishReason::kError) {
    std::fprintf(stderr, "error: %s\n", end.error.c_str());
    return 1;
  }
  print_timings(*eng, end);
  if (t_first != Clock::time_point{})
    std::fprintf(stderr, "[turbokv] ttft %.1f ms (submit to first token)\n", ms(t_submit, t_first));
  if (!a.load_session.empty())
    std::fprintf(stderr,
                 "[turbokv] session %s: %lld tokens loaded, not prefilled (read and checked in "
                 "%.1f ms)\n",
                 a.load_session.c_str(), static_cast<long long>(end.timings.cached_tokens),
                 ms(t_submit, t_submitted));
  if (!a.save_session.empty()) {
    if (!end.session_error.empty()) {
      std::fprintf(stderr, "error: %s\n", end.session_error.c_str());
      return 1;
    }
    // The write is what happens between the last token and the final event.
    std::fprintf(stderr, "[turbokv] session saved to %s: %lld tokens", a.save_session.c_str(),
                 static_cast<long long>(end.session_tokens));
    if (t_first != Clock::time_point{})
      std::fprintf(stderr, " (written in %.1f ms)", ms(t_last, t_end));
    std::fputc('\n', stderr);
  }
  // The cache holds the prompt and every sampled token but the last.
  const int64_t gen = end.timings.generated_tokens;
  print_kv_summary(*eng, a.common,
                   gen > 0 ? static_cast<int64_t>(ids.value().size()) + gen - 1 : 0);
  return 0;
}

RunFn add_generate(CLI::App& app) {
  auto a = std::make_shared<GenerateArgs>();
  CLI::App* sub = app.add_subcommand("generate", "Generate text from a prompt");
  a->sub = sub;
  add_common_options(sub, a->common);
  add_prompt_cache_options(sub, a->common);
  add_sampling_options(sub, a->sp);
  add_spec_options(sub, a->spec_flags);
  auto* p = sub->add_option("-p,--prompt", a->prompt, "Prompt text");
  sub->add_option("-f,--file", a->prompt_file, "Read the prompt from FILE")->excludes(p);
  sub->add_option("-n,--n-predict", a->n_predict, "Tokens to generate")
      ->check(int_range("--n-predict", 0, INT32_MAX));
  sub->add_option("--stop", a->stops,
                  "Stop when the output contains STR (repeatable; output ends before it)")
      ->take_all()
      ->allow_extra_args(false);
  sub->add_flag("--chat", a->chat, "Wrap the prompt in the model's chat template");
  sub->add_option("--system", a->system, "System message (with --chat)");
  sub->add_option("--save-session", a->save_session,
                  "Write the KV cache (prompt + output) to FILE when done (atomic)");
  sub->add_option("--load-session", a->load_session,
                  "Load a KV snapshot whose tokens start the prompt; only the rest is prefilled");
  return [a] { return run_generate(*a); };
}

}  // namespace tkv::cli
