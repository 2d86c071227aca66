// turbokv chat: interactive conversation using the model's chat template, through
// the public API (include/turbokv/): each turn submits the whole conversation.
// Line editing and history come from libedit on a terminal; Ctrl-C stops a reply.
#include <editline/readline.h>
#include <langinfo.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <clocale>
#include <cstring>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <utility>

#include <nlohmann/json.hpp>

#include "tools/turbokv/commands.h"

namespace tkv::cli {
namespace {
struct ChatArgs {
  CommonOptions common;
  std::string system;
  int n_predict = 512;
  turbokv::SamplingParams sp;
  SpecFlags spec_flags;
  turbokv::SpecParams spec;
  // KV snapshots: the session's KV after every turn, the messages beside it
  // (FILE.json, the /save format) so a later chat resumes the conversation.
  std::string save_session, load_session;
  CLI::App* sub = nullptr;
};

std::atomic<bool> g_interrupted{false};
extern "C" void on_sigint(int) {
  g_interrupted = true;
}

// Ctrl-C only sets a flag (no SA_RESTART, so a blocked read returns): the token
// callback stops the reply; at the prompt the first Ctrl-C says how to leave and a
// second one in a row leaves.
void catch_sigint() {
  struct sigaction sa {};
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
}

// One byte of terminal input, waiting in short polls so a Ctrl-C that arrives
// while libedit waits is seen at once; -1 on end of input or an interrupt.
int read_byte() {
  for (;;) {
    if (g_interrupted) return -1;
    pollfd p{STDIN_FILENO, POLLIN, 0};
    const int r = poll(&p, 1, 100);
    if (r < 0 && errno != EINTR) return -1;
    if (r <= 0) continue;
    unsigned char c = 0;
    const ssize_t n = read(STDIN_FILENO, &c, 1);
    if (n == 1) return c;
    if (n == 0 || (errno != EINTR && errno != EAGAIN)) return -1;
  }
}

// libedit's input function: one character as a code point (libedit stores the
// value as a wide character, so UTF-8 is decoded here). libedit's own reader
// retries a read interrupted by a signal and leaves the terminal in cooked mode
// after its handler runs, so a Ctrl-C at the prompt would go unseen.
extern "C" int chat_getc(FILE*) {
  const int b0 = read_byte();
  if (b0 < 0x80) return b0;  // ASCII or -1
  const int extra = b0 >= 0xF0 ? 3 : b0 >= 0xE0 ? 2 : b0 >= 0xC0 ? 1 : 0;
  int cp = b0 & (0x3F >> extra);
  for (int i = 0; i < extra; ++i) {
    const int b = read_byte();
    if (b < 0) return -1;
    cp = (cp << 6) | (b & 0x3F);
  }
  return extra == 0 ? 0xFFFD : cp;
}

enum class Input { kLine, kEnd, kInterrupt };

// One input line: libedit with history on a terminal, plain getline otherwise.
Input read_line(std::string& line) {
  g_interrupted = false;
  if (isatty(STDIN_FILENO)) {
    rl_catch_signals = 0;  // read before libedit's first use
    rl_getc_function = chat_getc;
    char* s = readline("> ");
    if (g_interrupted) {
      std::free(s);
      return Input::kInterrupt;
    }
    if (!s) return Input::kEnd;
    line = s;
    std::free(s);
    if (!line.empty()) add_history(line.c_str());
    return Input::kLine;
  }
  std::fputs("\n> ", stdout);
  std::fflush(stdout);
  if (std::getline(std::cin, line)) return Input::kLine;
  return g_interrupted ? Input::kInterrupt : Input::kEnd;
}

const char* kHelp =
    "/help  this list\n/reset  forget the conversation\n"
    "/save FILE  write the conversation as JSON\n/stats  KV cache summary\n"
    "/quit  leave (or Ctrl-D); Ctrl-C stops a reply\n";

class Chat {
 public:
  Chat(turbokv::Engine& eng, const ChatArgs& a) : eng_(eng), a_(a) { reset(); }
  void reset() {
    msgs_.clear();
    if (!a_.system.empty()) msgs_.push_back({"system", a_.system});
    kv_tokens_ = 0;
  }
  // A "/" command; false when the user asked to quit.
  bool command(const std::string& line) {
    if (line == "/quit" || line == "/exit") return false;
    if (line == "/help") {
      std::fputs(kHelp, stderr);
    } else if (line == "/reset") {
      reset();
      std::fputs("[chat] conversation cleared\n", stderr);
    } else if (line == "/stats") {
      print_kv_summary(eng_, a_.common, kv_tokens_);
    } else if (line.rfind("/save ", 0) == 0) {
      save(line.substr(6));
    } else {
      std::fprintf(stderr, "[chat] unknown command %s; /help lists the commands\n", line.c_str());
    }
    return true;
  }
  Status turn(const std::string& line);
  int64_t kv_tokens() const { return kv_tokens_; }
  // --load-session: the messages saved beside the snapshot; its KV is loaded
  // by the next turn. False (after printing why) when they cannot be read.
  bool resume(const std::string& path) {
    std::ifstream in(path + ".json");
    nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
    if (!in || j.is_discarded() || !j.is_array()) {
      std::fprintf(stderr, "error: [chat] cannot read the session's messages %s.json\n",
                   path.c_str());
      return false;
    }
    msgs_.clear();
    for (const auto& m : j)
      msgs_.push_back({m.value("role", std::string()), m.value("content", std::string())});
    pending_load_ = path;
    std::fprintf(stderr, "[chat] resumed %zu messages from %s\n", msgs_.size(), path.c_str());
    return true;
  }

 private:
  void save(const std::string& path, bool quiet = false) {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& m : msgs_) j.push_back({{"role", m.role}, {"content", m.content}});
    std::ofstream out(path);
    out << j.dump(1) << "\n";
    if (!quiet || !out)
      std::fprintf(stderr,
                   out ? "[chat] saved %zu messages to %s\n"
                       : "[chat] cannot write %zu "
                         "messages to %s\n",
                   msgs_.size(), path.c_str());
  }
  Result<turbokv::RequestHandle> submit(turbokv::Request r);
  bool fits(size_t n) const {
    if (static_cast<int64_t>(n) <= a_.common.ctx) return true;
    std::fprintf(stderr,
                 "\n[chat] context full: %lld of %lld tokens used, %lld more needed; /reset "
                 "starts over (or use a larger -c)\n",
                 static_cast<long long>(kv_tokens_), static_cast<long long>(a_.common.ctx),
                 static_cast<long long>(static_cast<int64_t>(n) - kv_tokens_));
    return false;
  }
  turbokv::Engine& eng_;
  const ChatArgs& a_;
  std::vector<turbokv::ChatMessage> msgs_;
  int64_t kv_tokens_ = 0;     // tokens the last turn left in the cache
  std::string pending_load_;  // --load-session, until the first turn loads it
  bool loading_ = false;      // this turn loads the session
};

// The first turn after --load-session loads the snapshot. The conversation is
// re-rendered from its messages, whose tokens can differ from the sampled ones
// (a reply re-tokenizes differently): then the snapshot is not a prefix and the
// turn prefills instead, saying so.
Result<turbokv::RequestHandle> Chat::submit(turbokv::Request r) {
  if (pending_load_.empty()) return eng_.submit(r);
  r.load_session = std::exchange(pending_load_, std::string());
  auto h = eng_.submit(r);
  if (h.ok()) loading_ = true;
  if (h.ok() || h.status().message().find("not a prefix") == std::string::npos) return h;
  std::fprintf(stderr, "[chat] %s; prefilling the conversation instead\n",
               h.status().message().c_str());
  r.load_session.clear();
  return eng_.submit(r);
}

// Each turn sends the whole conversation, so the chat keeps no cache state of its
// own; with the engine's prefix cache the earlier turns need no new prefill.
Status Chat::turn(const std::string& line) {
  const turbokv::Tokenizer& tok = eng_.tokenizer();
  msgs_.push_back({"user", line});
  TKV_ASSIGN_OR_RETURN(std::string full, tok.apply_chat_template(msgs_, true));
  const std::vector<int32_t> ids = tok.encode(full, true, true);
  if (!fits(ids.size() + 1)) {
    msgs_.pop_back();
    return Status();
  }
  turbokv::Request r;
  r.prompt_tokens = ids;
  r.sampling = a_.sp;
  r.spec = a_.spec;
  r.max_tokens = a_.n_predict;
  r.save_session = a_.save_session;
  g_interrupted = false;
  TKV_ASSIGN_OR_RETURN(turbokv::RequestHandle h, submit(r));
  std::string reply;
  turbokv::Event ev, end;
  // After Ctrl-C the reply is what streamed before it; the engine ends the
  // request at its next step, and what arrives until then is dropped.
  bool stopped = false;
  while (h.next(ev)) {
    if (ev.is_final()) end = ev;
    if (g_interrupted && !stopped) {
      h.cancel();
      stopped = true;
    }
    if (stopped) continue;
    reply += ev.text;
    std::fwrite(ev.text.data(), 1, ev.text.size(), stdout);
    std::fflush(stdout);
  }
  if (end.finish == turbokv::FinishReason::kError) return Status(StatusCode::kInternal, end.error);
  msgs_.push_back({"assistant", reply});
  if (std::exchange(loading_, false))
    std::fprintf(stderr, "[chat] %lld tokens of the session loaded, not prefilled\n",
                 static_cast<long long>(end.timings.cached_tokens));
  if (!a_.save_session.empty()) {
    if (!end.session_error.empty())
      std::fprintf(stderr, "\n[chat] session not saved: %s", end.session_error.c_str());
    else
      save(a_.save_session + ".json", /*quiet=*/true);
  }
  const int64_t gen = end.timings.generated_tokens;
  kv_tokens_ = static_cast<int64_t>(ids.size()) + std::max<int64_t>(gen - 1, 0);
  const auto f = end.finish;
  if (stopped) std::fputs("\n[chat] reply stopped (Ctrl-C)", stderr);
  if (f == turbokv::FinishReason::kContextFull)
    std::fputs("\n[chat] context full: the reply was cut; /reset starts over", stderr);
  std::fprintf(stderr, "\n[%.1f tok/s, finish: %s]\n", end.timings.decode_tok_s(),
               turbokv::finish_reason_name(f));
  return Status();
}

int run_chat(ChatArgs& a) {
  if (!check_common(a.sub, a.common) || !finish_sampling(a.sub, a.sp) ||
      !finish_spec(a.sub, a.spec_flags, &a.spec, &a.common))
    return 1;
  auto eng = make_api_engine(a.common);
  if (!eng) return 1;
  if (!check_chat_template(*eng, a.common.model)) return 1;
  Chat chat(*eng, a);
  if (!a.load_session.empty() && !chat.resume(a.load_session)) return 1;
  std::fprintf(stderr, "[turbokv] chat with %s (kv %s). /help for commands; Ctrl-D quits.\n",
               eng->model_info().name.c_str(), eng->kv_info().scheme.c_str());
  catch_sigint();
  // libedit edits wide characters: the model speaks UTF-8, so the terminal is
  // read as UTF-8 whatever the locale says (only the character type changes).
  if (!std::setlocale(LC_CTYPE, "") || std::strcmp(nl_langinfo(CODESET), "UTF-8") != 0)
    std::setlocale(LC_CTYPE, "C.UTF-8");
  std::string line;
  for (int interrupts = 0; interrupts < 2;) {
    const Input in = read_line(line);
    if (in == Input::kEnd) break;
    if (in == Input::kInterrupt) {
      if (++interrupts < 2) std::fputs("\n[chat] Ctrl-C again, /quit or Ctrl-D leaves\n", stderr);
      continue;
    }
    interrupts = 0;
    if (line.empty()) continue;
    if (line[0] == '/') {
      if (!chat.command(line)) break;
      continue;
    }
    if (Status st = chat.turn(line); !st.ok()) {
      std::fprintf(stderr, "\nerror: %s\n", st.message().c_str());
      return 1;
    }
  }
  print_kv_summary(*eng, a.common, chat.kv_tokens());
  return 0;
}
}  // namespace

RunFn add_chat(CLI::App& app) {
  auto a = std::make_shared<ChatArgs>();
  CLI::App* sub = app.add_subcommand("chat", "Interactive chat using the model's chat template");
  a->sub = sub;
  add_common_options(sub, a->common);
  add_prompt_cache_options(sub, a->common);
  add_sampling_options(sub, a->sp);
  add_spec_options(sub, a->spec_flags);
  sub->add_option("--system", a->system, "System message");
  sub->add_option("-n,--n-predict", a->n_predict, "Max tokens per reply")
      ->check(int_range("--n-predict", 1, INT32_MAX));
  sub->add_option("--save-session", a->save_session,
                  "After every reply write the KV cache to FILE and the messages to FILE.json");
  sub->add_option("--load-session", a->load_session,
                  "Resume a conversation saved with --save-session (no prefill of its KV)");
  return [a] { return run_chat(*a); };
}

}  // namespace tkv::cli
