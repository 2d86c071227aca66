// Response JSON (see responses.h). Token pieces can end inside a UTF-8
// character: bodies are dumped with invalid bytes replaced (dump_json).
#include "server/responses.h"

#include <ctime>
#include <random>

namespace tkv::server {

using nlohmann::json;
using turbokv::FinishReason;

const char* openai_finish(FinishReason f) {
  switch (f) {
    case FinishReason::kLength:
    case FinishReason::kContextFull:
      return "length";
    case FinishReason::kEos:
    case FinishReason::kStopString:
    case FinishReason::kStopToken:
      return "stop";
    default:
      return nullptr;
  }
}

namespace {

json nullable(const char* s) {
  return s ? json(s) : json(nullptr);
}

std::string random_id(const char* prefix) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(rng()));
  return std::string(prefix) + buf;
}

json bytes_of(const std::string& s) {
  json b = json::array();
  for (unsigned char c : s) b.push_back(static_cast<int>(c));
  return b;
}

}  // namespace

ResponseBuilder::ResponseBuilder(const GenRequest& g, const turbokv::Engine& eng,
                                 std::string model_id)
    : g_(g),
      eng_(eng),
      model_id_(std::move(model_id)),
      id_(random_id(g.chat ? "chatcmpl-" : "cmpl-")),
      created_(static_cast<int64_t>(std::time(nullptr))) {}

json ResponseBuilder::envelope(bool chunk) const {
  const char* object =
      g_.chat ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion";
  return {{"id", id_}, {"object", object}, {"created", created_}, {"model", model_id_}};
}

json ResponseBuilder::empty_logprobs() const {
  if (g_.chat) return {{"content", json::array()}};
  return {{"tokens", json::array()},
          {"token_logprobs", json::array()},
          {"top_logprobs", json::array()},
          {"text_offset", json::array()}};
}

void ResponseBuilder::add_logprobs(const turbokv::Event& e, int64_t text_offset, json& acc) const {
  const auto& tok = eng_.tokenizer();
  const std::string piece = tok.token_to_piece(e.token);
  if (g_.chat) {
    json top = json::array();
    for (const auto& t : e.top_logprobs) {
      const std::string p = tok.token_to_piece(t.token);
      top.push_back({{"token", p}, {"logprob", t.logprob}, {"bytes", bytes_of(p)}});
    }
    acc["content"].push_back({{"token", piece},
                              {"logprob", e.logprob},
                              {"bytes", bytes_of(piece)},
                              {"top_logprobs", top}});
    return;
  }
  json top = json::object();
  for (const auto& t : e.top_logprobs) top[tok.token_to_piece(t.token)] = t.logprob;
  acc["tokens"].push_back(piece);
  acc["token_logprobs"].push_back(e.logprob);
  acc["top_logprobs"].push_back(top);
  acc["text_offset"].push_back(text_offset);
}

json ResponseBuilder::delta_chunk(int index, const std::string& text, const json& logprobs,
                                  bool with_role) const {
  json c = envelope(true);
  json choice = {{"index", index}, {"logprobs", logprobs}, {"finish_reason", nullptr}};
  if (g_.chat) {
    json delta = {{"content", text}};
    if (with_role) delta["role"] = "assistant";
    choice["delta"] = delta;
  } else {
    choice["text"] = text;
  }
  c["choices"] = json::array({choice});
  if (g_.include_usage) c["usage"] = nullptr;
  return c;
}

json ResponseBuilder::finish_chunk(int index, FinishReason f, const turbokv::Timings& t) const {
  json c = envelope(true);
  json choice = {
      {"index", index}, {"logprobs", nullptr}, {"finish_reason", nullable(openai_finish(f))}};
  if (g_.chat)
    choice["delta"] = json::object();
  else
    choice["text"] = "";
  c["choices"] = json::array({choice});
  if (g_.include_usage) c["usage"] = nullptr;
  c["timings"] = timings(t);
  return c;
}

json ResponseBuilder::timings(const turbokv::Timings& t) {
  const auto per_token = [](int64_t n, double ms) { return n > 0 ? ms / n : 0.0; };
  return {{"cache_n", t.cached_tokens},
          {"prompt_n", t.prefill_tokens},
          {"prompt_ms", t.prefill_ms},
          {"prompt_per_token_ms", per_token(t.prefill_tokens, t.prefill_ms)},
          {"prompt_per_second", t.prefill_ms > 0 ? t.prefill_tokens * 1000.0 / t.prefill_ms : 0.0},
          {"predicted_n", t.decode_tokens},
          {"predicted_ms", t.decode_ms},
          {"predicted_per_token_ms", per_token(t.decode_tokens, t.decode_ms)},
          {"predicted_per_second", t.decode_tok_s()},
          {"draft_n", t.drafted_tokens},
          {"draft_n_accepted", t.accepted_tokens}};
}

json ResponseBuilder::usage_chunk(const json& u) const {
  json c = envelope(true);
  c["choices"] = json::array();
  c["usage"] = u;
  return c;
}

json ResponseBuilder::usage(const std::vector<ChoiceResult>& choices) const {
  const int64_t prompt = static_cast<int64_t>(g_.req.prompt_tokens.size());
  int64_t completion = 0;
  for (const auto& c : choices) completion += c.tokens;
  // The prompt is counted once; cached: choice 0's (the others fork from its prefill).
  const int64_t cached = choices.empty() ? 0 : choices[0].timings.cached_tokens;
  return {{"prompt_tokens", prompt},
          {"completion_tokens", completion},
          {"total_tokens", prompt + completion},
          {"prompt_tokens_details", {{"cached_tokens", cached}}}};
}

json ResponseBuilder::full(const std::vector<ChoiceResult>& choices, const json& u) const {
  json body = envelope(false);
  json list = json::array();
  for (size_t i = 0; i < choices.size(); ++i) {
    const ChoiceResult& c = choices[i];
    json choice = {{"index", i},
                   {"finish_reason", nullable(openai_finish(c.finish))},
                   {"logprobs", g_.logprobs >= 0 ? c.logprobs : json(nullptr)}};
    if (g_.chat)
      choice["message"] = {{"role", "assistant"}, {"content", c.text}};
    else
      choice["text"] = c.text;
    list.push_back(choice);
  }
  body["choices"] = list;
  body["usage"] = u;
  if (!choices.empty()) body["timings"] = timings(choices[0].timings);
  return body;
}

}  // namespace tkv::server
