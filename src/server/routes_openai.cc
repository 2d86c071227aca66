// POST /v1/chat/completions and /v1/completions: parse and check everything,
// admit (429 when full), submit, then either collect the choices into one body
// or stream them as SSE chunks. A stream whose client is gone (a write fails)
// cancels its requests, which frees their KV pages at the engine's next step.
#include <httplib.h>

#include "server/generation.h"
#include "server/responses.h"
#include "server/routes.h"
#include "server/sse.h"

namespace tkv::server {
namespace {

using nlohmann::json;
using turbokv::FinishReason;
using namespace std::chrono_literals;

// Folds one event into its choice's result; the token's logprobs (or null).
json absorb(const GenRequest& g, const ResponseBuilder& rb, const ChoiceEvent& ce,
            ChoiceResult& c) {
  json lp = nullptr;
  if (ce.ev.token >= 0) {
    ++c.tokens;
    if (g.logprobs >= 0) {
      lp = rb.empty_logprobs();
      rb.add_logprobs(ce.ev, static_cast<int64_t>(c.text.size()), lp);
    }
  }
  c.text += ce.ev.text;
  if (ce.ev.is_final()) {
    c.finish = ce.ev.finish;
    c.timings = ce.ev.timings;
  }
  return lp;
}

ApiError ended_error(const turbokv::Event& e) {
  if (e.finish == FinishReason::kCancelled)
    return ApiError{503, "the request was cancelled (the server is shutting down)", "server_error",
                    "", "cancelled"};
  return ApiError{500, "generation failed: " + e.error, "server_error", "", ""};
}

void respond_full(ServerState& s, const GenRequest& g, Generation& gen, const ResponseBuilder& rb,
                  httplib::Response& res) {
  std::vector<ChoiceResult> choices(g.n);
  for (auto& c : choices)
    if (g.logprobs >= 0) c.logprobs = rb.empty_logprobs();
  ChoiceEvent ce;
  while (!gen.finished()) {
    if (!gen.next(ce, 500ms)) continue;
    ChoiceResult& c = choices[ce.index];
    const json lp = absorb(g, rb, ce, c);
    if (!lp.is_null()) {
      if (g.chat)
        c.logprobs["content"].push_back(lp["content"][0]);
      else
        for (const char* k : {"tokens", "token_logprobs", "top_logprobs", "text_offset"})
          c.logprobs[k].push_back(lp[k][0]);
    }
    if (ce.ev.is_final() && !openai_finish(ce.ev.finish)) {
      gen.cancel();
      return fail(s, res, ended_error(ce.ev));
    }
  }
  send_json(res, rb.full(choices, rb.usage(choices)));
}

// The whole stream in one provider call: httplib stops calling a provider
// once the server is stopping, and a drain must let streams finish.
bool stream(const GenRequest& g, Generation& gen, const ResponseBuilder& rb,
            httplib::DataSink& sink) {
  std::vector<ChoiceResult> choices(g.n);
  auto write_ok = [&](bool ok) {
    if (!ok) gen.cancel();  // the client is gone
    return ok;
  };
  if (g.chat)
    for (int i = 0; i < g.n; ++i)
      if (!write_ok(sse_data(sink, rb.delta_chunk(i, "", nullptr, true)))) return false;
  auto last_write = std::chrono::steady_clock::now();
  ChoiceEvent ce;
  while (!gen.finished()) {
    if (!gen.next(ce, 1000ms)) {
      // Quiet (queued or a long prefill): a comment finds out whether the client left.
      if (std::chrono::steady_clock::now() - last_write > 2s) {
        if (!write_ok(sse_comment(sink, "waiting"))) return false;
        last_write = std::chrono::steady_clock::now();
      }
      continue;
    }
    const json lp = absorb(g, rb, ce, choices[ce.index]);
    if (!ce.ev.text.empty() || !lp.is_null())
      if (!write_ok(sse_data(sink, rb.delta_chunk(ce.index, ce.ev.text, lp, false)))) return false;
    if (ce.ev.is_final()) {
      const json chunk = openai_finish(ce.ev.finish)
                             ? rb.finish_chunk(ce.index, ce.ev.finish, ce.ev.timings)
                             : error_json(ended_error(ce.ev));
      if (!write_ok(sse_data(sink, chunk))) return false;
    }
    last_write = std::chrono::steady_clock::now();
  }
  if (g.include_usage && !write_ok(sse_data(sink, rb.usage_chunk(rb.usage(choices))))) return false;
  if (!write_ok(sse_done(sink))) return false;
  sink.done();
  return true;
}

void generate(ServerState& s, const httplib::Request& req, httplib::Response& res, bool chat) {
  json body;
  if (auto e = parse_body(req.body, body)) return fail(s, res, *e);
  auto g = std::make_shared<GenRequest>();
  if (auto e = parse_gen_request(body, chat, s.eng(), *g)) return fail(s, res, *e);
  MaybeError err;
  std::shared_ptr<Generation> gen = Generation::admit(s, err, g->n);
  if (!gen) return fail(s, res, *err);
  int slot = -1;
  std::string snapshot;
  if (auto e = s.slots->acquire(g->id_slot, g->req.prompt_tokens, &slot, &snapshot))
    return fail(s, res, *e);
  if (!snapshot.empty()) {  // a restored slot: its KV for the prefix both share
    g->req.load_session = snapshot;
    g->req.load_session_common = true;
  }
  if (auto e = gen->start(g->req, slot)) return fail(s, res, *e);
  auto rb = std::make_shared<ResponseBuilder>(*g, s.eng(), s.opts.model_id);
  if (!g->stream) return respond_full(s, *g, *gen, *rb, res);
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [g, gen, rb](size_t, httplib::DataSink& sink) { return stream(*g, *gen, *rb, sink); },
      [gen](bool ok) {
        if (!ok) gen->cancel();
      });
}

}  // namespace

void add_openai_routes(httplib::Server& http, ServerState& s) {
  http.Post("/v1/chat/completions", [&s](const httplib::Request& req, httplib::Response& res) {
    generate(s, req, res, true);
  });
  http.Post("/v1/completions", [&s](const httplib::Request& req, httplib::Response& res) {
    generate(s, req, res, false);
  });
}

}  // namespace tkv::server
