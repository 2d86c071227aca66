// turbokv serve: the OpenAI-compatible HTTP server (src/server/) over one
// engine. Prints what the cache holds (scheme, bytes per token, how many full
// contexts fit) and the bound address; SIGTERM or SIGINT drains and exits 0.
#include <pthread.h>

#include <atomic>
#include <cctype>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "base/mem_info.h"
#include "server/kv_events.h"
#include "server/server.h"
#include "tools/turbokv/commands.h"

namespace tkv::cli {
namespace {

struct ServeArgs {
  CommonOptions common;
  server::ServerOptions srv;
  std::string api_key_file;
  std::string max_body = "8MiB";
  int parallel = 8;
  SpecFlags spec_flags;
  server::KvEventsOptions kv_events;
  std::string kv_events_format = "array";
  CLI::App* sub = nullptr;
};

bool read_key_file(ServeArgs& a) {
  if (a.api_key_file.empty()) return true;
  std::ifstream in(a.api_key_file);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string key = ss.str();
  while (!key.empty() && std::isspace(static_cast<unsigned char>(key.back()))) key.pop_back();
  if (!in || key.empty()) {
    std::fprintf(stderr, "error: [serve] cannot read an API key from '%s'\n",
                 a.api_key_file.c_str());
    return false;
  }
  a.srv.api_key = key;
  return true;
}

void print_start(const turbokv::Engine& eng, const ServeArgs& a) {
  const turbokv::ModelInfo& mi = eng.model_info();
  const turbokv::KvInfo kv = eng.kv_info();
  const int64_t fit = kv.context > 0 ? kv.pool_tokens / kv.context : 0;
  std::printf("model: %s (%s, %s, %d layers, head_dim %d)\n", a.srv.model_id.c_str(),
              mi.name.c_str(), mi.arch.c_str(), mi.n_layers, mi.head_dim);
  std::printf(
      "kv cache: %s, %zu bytes/token, context %lld tokens, pool %lld tokens (%.1f MiB): %lld "
      "full-context sequences fit; --parallel %d\n",
      kv.scheme.c_str(), kv.bytes_per_token, static_cast<long long>(kv.context),
      static_cast<long long>(kv.pool_tokens), static_cast<double>(kv.allocated_bytes) / 1048576.0,
      static_cast<long long>(fit), a.parallel);
  if (!mi.has_chat_template)
    std::printf("note: the model has no chat template: /v1/chat/completions answers 400\n");
}

// --slot-save-path: created if missing, kept as a canonical absolute path (the
// server confines snapshot names to it).
bool prepare_slot_dir(ServeArgs& a) {
  std::string& dir = a.srv.slot_save_path;
  if (dir.empty()) return true;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  const auto canon = std::filesystem::canonical(dir, ec);
  if (ec || !std::filesystem::is_directory(canon)) {
    std::fprintf(stderr, "error: [serve] --slot-save-path %s: not a usable directory%s%s\n",
                 dir.c_str(), ec ? ": " : "", ec ? ec.message().c_str() : "");
    return false;
  }
  dir = canon.string();
  return true;
}

// --kv-events: checked and bound before the model loads, so a bad address fails fast.
bool start_kv_events(ServeArgs& a, std::shared_ptr<server::KvEventPublisher>* out) {
  server::KvEventsOptions& o = a.kv_events;
  if (o.endpoint.empty()) {
    if (!o.replay_endpoint.empty())
      std::fprintf(stderr, "error: [serve] --kv-events-replay needs --kv-events\n");
    return o.replay_endpoint.empty();
  }
  Status st = server::check_kv_events_endpoint(o.endpoint, "--kv-events");
  if (st.ok() && !o.replay_endpoint.empty())
    st = server::check_kv_events_endpoint(o.replay_endpoint, "--kv-events-replay");
  if (!st.ok()) {
    std::fprintf(stderr, "error: %s\n", st.message().c_str());
    return false;
  }
  o.map_events = a.kv_events_format == "map";
  auto pub = server::KvEventPublisher::start(o);
  if (!pub.ok()) {
    std::fprintf(stderr, "error: %s\n", pub.status().message().c_str());
    return false;
  }
  *out = std::move(pub).value();
  std::printf("kv events on %s%s%s (%s events)\n", (*out)->endpoint().c_str(),
              o.replay_endpoint.empty() ? "" : ", replay on ", (*out)->replay_endpoint().c_str(),
              a.kv_events_format.c_str());
  return true;
}

int run_serve(ServeArgs& a) {
  std::shared_ptr<server::KvEventPublisher> kv_events;  // outlives the engine that feeds it
  if (!check_common(a.sub, a.common) || !read_key_file(a) ||
      !finish_spec(a.sub, a.spec_flags, &a.srv.spec, &a.common) || !prepare_slot_dir(a))
    return 1;
  a.srv.max_body_bytes = parse_byte_size(a.max_body).value();  // validated at parse time
  if (a.srv.model_id.empty()) {
    std::string base = a.common.model.substr(a.common.model.find_last_of('/') + 1);
    if (base.size() > 5 && base.substr(base.size() - 5) == ".gguf") base.resize(base.size() - 5);
    a.srv.model_id = base;
  }
  if (a.srv.host != "127.0.0.1" && a.srv.host != "localhost" && a.srv.host != "::1" &&
      a.srv.api_key.empty())
    std::fprintf(stderr, "warning: listening on %s without --api-key\n", a.srv.host.c_str());
  // Every thread (engine, HTTP pool) inherits this mask; one thread takes the signals.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);  // a client gone mid-write is a failed write, not a death
  // After the mask: the publisher's threads (and ZMQ's) must not take SIGTERM.
  if (!start_kv_events(a, &kv_events)) return 1;
  // Declared first, destroyed last: the server (and its requests) end before the engine.
  std::unique_ptr<turbokv::Engine> eng;
  server::Server srv(a.srv);
  auto port = srv.bind();
  if (!port.ok()) {
    std::fprintf(stderr, "error: %s\n", port.status().message().c_str());
    return 1;
  }
  std::printf("listening on http://%s:%d (loading the model: /health answers 503 until ready)\n",
              a.srv.host.c_str(), port.value());
  std::fflush(stdout);
  std::thread runner([&srv] { srv.run(); });
  std::atomic<bool> leaving{false};
  std::thread signals([&srv, &leaving, stop_signals, drain_s = a.srv.drain_timeout_s] {
    int sig = 0;
    sigwait(&stop_signals, &sig);
    if (leaving) return;  // woken by finish() below
    std::printf("[serve] signal %d: no new connections; draining (up to %.0f s)\n", sig, drain_s);
    std::fflush(stdout);
    srv.shutdown();
  });
  // Before srv goes: the signal thread must not outlive it.
  auto finish = [&] {
    leaving = true;
    pthread_kill(signals.native_handle(), SIGTERM);
    signals.join();
  };
  turbokv::KvEventsCallback on_kv_events;
  if (kv_events) {
    on_kv_events = [kv_events](std::vector<turbokv::KvEvent>&& ev) {
      kv_events->submit(std::move(ev));
    };
    srv.set_kv_events(kv_events);
  }
  eng = make_api_engine(a.common, a.parallel, std::move(on_kv_events));
  if (!eng) {  // Engine::create's refusal was printed
    srv.shutdown();
    runner.join();
    finish();
    return 1;
  }
  print_start(*eng, a);  // before /health turns 200, so a client that waited for it saw this
  srv.set_engine(*eng);
  std::printf("ready\n");
  std::fflush(stdout);
  runner.join();
  finish();
  std::printf("[serve] stopped\n");
  std::fflush(stdout);
  return 0;
}

}  // namespace

RunFn add_serve(CLI::App& app) {
  auto a = std::make_shared<ServeArgs>();
  CLI::App* sub = app.add_subcommand("serve", "OpenAI-compatible HTTP server");
  a->sub = sub;
  add_common_options(sub, a->common);
  add_prompt_cache_options(sub, a->common);
  add_spec_options(sub, a->spec_flags);
  server::ServerOptions& s = a->srv;
  sub->add_option("--host", s.host, "Address to listen on");
  sub->add_option("--port", s.port, "Port (0: a free one, printed)")
      ->check(int_range("--port", 0, 65535));
  auto* key = sub->add_option(
      "--api-key", s.api_key,
      "Require Authorization: Bearer KEY on every route but /health and the chat page");
  sub->add_option("--api-key-file", a->api_key_file, "Read the API key from FILE")->excludes(key);
  sub->add_option("--parallel", a->parallel, "Sequences in the engine's batch at once")
      ->check(int_range("--parallel", 1, 1024));
  sub->add_option("--max-queue", s.max_queue,
                  "Requests (choices) that may wait beyond --parallel; more get 429")
      ->check(int_range("--max-queue", 0, 1 << 20));
  sub->add_option("--http-threads", s.http_threads,
                  "Connections served at once (each streaming client holds one)")
      ->check(int_range("--http-threads", 8, 4096));
  sub->add_option("--max-body", a->max_body, "Largest request body, e.g. 8MiB (more: 413)")
      ->check(CLI::Validator(
          [](std::string& v) {
            auto r = parse_byte_size(v);
            return r.ok() ? std::string() : r.status().message();
          },
          "SIZE", "SIZE"));
  sub->add_option("--slot-save-path", s.slot_save_path,
                  "Directory for POST /slots/{id}?action=save|restore snapshots (off without)");
  sub->add_option("--drain-timeout", s.drain_timeout_s,
                  "Seconds in-flight requests get after SIGTERM before they are cancelled")
      ->check(CLI::Range(0.0, 3600.0));
  sub->add_option("--alias", s.model_id, "Model id in /v1/models (default: the file name)");
  sub->add_option("--kv-events", a->kv_events.endpoint,
                  "Publish KV block events (vLLM's ZMQ format) on tcp://HOST:PORT or ipc://PATH");
  sub->add_option("--kv-events-replay", a->kv_events.replay_endpoint,
                  "ROUTER endpoint that replays buffered event batches to late subscribers");
  sub->add_option("--kv-events-format", a->kv_events_format,
                  "Events as tagged arrays (vLLM up to PR #42892) or maps (after it)")
      ->check(CLI::IsMember({"array", "map"}));
  sub->add_option("--kv-events-topic", a->kv_events.topic,
                  "First frame of every event message (default: empty, as vLLM)");
  return [a] { return run_serve(*a); };
}

}  // namespace tkv::cli
