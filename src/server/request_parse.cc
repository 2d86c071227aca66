// OpenAI request bodies -> turbokv::Request (see request_parse.h). Defaults follow
// OpenAI's, not the CLI's: temperature 1, top_p 1, top_k and min_p off; an
// unseeded sampled request draws a random seed.
#include "server/request_parse.h"

#include <cmath>
#include <random>
#include <set>

namespace tkv::server {
namespace {

using nlohmann::json;

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// The body's fields, read once each; whatever was never asked for is unknown.
class Fields {
 public:
  explicit Fields(const json& j) : j_(j) {}
  // The field, or null when absent or JSON null (clients send null for "unset").
  const json* get(const std::string& key) {
    seen_.insert(key);
    auto it = j_.find(key);
    return it == j_.end() || it->is_null() ? nullptr : &*it;
  }
  MaybeError unknown() const {
    for (const auto& [k, v] : j_.items())
      if (!seen_.count(k)) return bad_request("unknown field '" + k + "'", k);
    return std::nullopt;
  }

 private:
  const json& j_;
  std::set<std::string> seen_;
};

MaybeError get_number(Fields& f, const std::string& key, double lo, double hi, float& out) {
  const json* v = f.get(key);
  if (!v) return std::nullopt;
  if (!v->is_number()) return bad_request("'" + key + "' must be a number", key);
  const double x = v->get<double>();
  if (!std::isfinite(x) || x < lo || x > hi)
    return bad_request(
        key + " " + num(x) + " out of range (valid: " + num(lo) + " to " + num(hi) + ")", key);
  out = static_cast<float>(x);
  return std::nullopt;
}

MaybeError get_int(Fields& f, const std::string& key, int64_t lo, int64_t hi, int64_t& out) {
  const json* v = f.get(key);
  if (!v) return std::nullopt;
  if (!v->is_number_integer()) return bad_request("'" + key + "' must be an integer", key);
  const int64_t x =
      v->is_number_unsigned() && v->get<uint64_t>() > INT64_MAX ? INT64_MAX : v->get<int64_t>();
  if (x < lo || x > hi)
    return bad_request(key + " " + std::to_string(x) + " out of range (valid: " +
                           std::to_string(lo) + " to " + std::to_string(hi) + ")",
                       key);
  out = x;
  return std::nullopt;
}

MaybeError get_bool(Fields& f, const std::string& key, bool& out) {
  const json* v = f.get(key);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) return bad_request("'" + key + "' must be a boolean", key);
  out = v->get<bool>();
  return std::nullopt;
}

// "content": a string or a list of {"type": "text", "text": ...} parts.
MaybeError message_text(const json& c, std::string& out) {
  if (c.is_string()) {
    out = c.get<std::string>();
    return std::nullopt;
  }
  if (!c.is_array()) return bad_request("message content must be a string or a list of parts");
  for (const json& p : c) {
    if (!p.is_object() || p.value("type", "") != "text" || !p.contains("text") ||
        !p["text"].is_string())
      return bad_request("only text content parts ({\"type\": \"text\", \"text\": ...}) are served",
                         "messages");
    out += p["text"].get<std::string>();
  }
  return std::nullopt;
}

MaybeError chat_prompt(Fields& f, const turbokv::Engine& eng, std::vector<int32_t>& out) {
  const json* m = f.get("messages");
  if (!m) return bad_request("'messages' is required", "messages");
  if (!m->is_array() || m->empty())
    return bad_request("'messages' must be a non-empty list", "messages");
  if (!eng.model_info().has_chat_template)
    return bad_request("model " + eng.model_info().name +
                           " has no chat template (tokenizer.chat_template is absent): use "
                           "/v1/completions with a prompt instead",
                       "messages");
  std::vector<turbokv::ChatMessage> msgs;
  for (const json& x : *m) {
    if (!x.is_object()) return bad_request("each message must be an object", "messages");
    for (const auto& [k, v] : x.items())
      if (k != "role" && k != "content" && k != "name")
        return bad_request("unknown message field '" + k + "'", "messages");
    if (!x.contains("role") || !x["role"].is_string())
      return bad_request("each message needs a string 'role'", "messages");
    std::string role = x["role"].get<std::string>();
    if (role == "developer") role = "system";
    if (role != "system" && role != "user" && role != "assistant")
      return bad_request("message role '" + role +
                             "' is not served (valid: system, user, "
                             "assistant, developer)",
                         "messages");
    std::string text;
    if (!x.contains("content")) return bad_request("each message needs 'content'", "messages");
    if (auto e = message_text(x["content"], text)) return e;
    msgs.push_back({role, std::move(text)});
  }
  auto rendered = eng.tokenizer().apply_chat_template(msgs);
  if (!rendered.ok()) return bad_request(rendered.status().message(), "messages");
  out = eng.tokenizer().encode(rendered.value(), true, true);
  return std::nullopt;
}

MaybeError token_list(const json& a, int32_t n_vocab, std::vector<int32_t>& out) {
  for (const json& t : a) {
    if (!t.is_number_integer()) return bad_request("prompt tokens must be integers", "prompt");
    const int64_t id = t.get<int64_t>();
    if (id < 0 || id >= n_vocab)
      return bad_request("prompt token id " + std::to_string(id) + " out of range (valid: 0 to " +
                             std::to_string(n_vocab - 1) + ")",
                         "prompt");
    out.push_back(static_cast<int32_t>(id));
  }
  return std::nullopt;
}

// "prompt": a string, a token list, or a one-element list of either.
MaybeError completion_prompt(Fields& f, const turbokv::Engine& eng, std::vector<int32_t>& out) {
  const json* p = f.get("prompt");
  if (!p) return bad_request("'prompt' is required", "prompt");
  const json* one = p;
  if (p->is_array() && p->size() == 1 && ((*p)[0].is_string() || (*p)[0].is_array()))
    one = &(*p)[0];
  else if (p->is_array() && !p->empty() && !(*p)[0].is_number_integer())
    return bad_request("one prompt per request is served (a batch of prompts is not)", "prompt");
  if (one->is_string()) {
    out = eng.tokenizer().encode(one->get<std::string>(), true, true);
    return std::nullopt;
  }
  if (one->is_array()) return token_list(*one, eng.model_info().n_vocab, out);
  return bad_request("'prompt' must be a string or a list of token ids", "prompt");
}

MaybeError stop_strings(Fields& f, std::vector<std::string>& out) {
  const json* s = f.get("stop");
  if (!s) return std::nullopt;
  if (s->is_string()) {
    out.push_back(s->get<std::string>());
  } else if (s->is_array() && s->size() <= 16) {
    for (const json& x : *s) {
      if (!x.is_string()) return bad_request("'stop' entries must be strings", "stop");
      out.push_back(x.get<std::string>());
    }
  } else {
    return bad_request("'stop' must be a string or a list of at most 16 strings", "stop");
  }
  for (const std::string& x : out)
    if (x.empty()) return bad_request("'stop' strings must not be empty", "stop");
  return std::nullopt;
}

MaybeError sampling(Fields& f, turbokv::SamplingParams& s) {
  s.temperature = 1.0f;
  s.top_p = 1.0f;
  s.top_k = 0;
  s.min_p = 0.0f;
  int64_t top_k = 0, seed = -1;
  bool seeded = f.get("seed") != nullptr;
  if (auto e = get_number(f, "temperature", 0, 2, s.temperature)) return e;
  if (auto e = get_number(f, "top_p", 1e-6, 1, s.top_p)) return e;
  if (auto e = get_int(f, "top_k", -1, 1 << 20, top_k)) return e;  // -1: off (vLLM)
  if (auto e = get_number(f, "min_p", 0, 1, s.min_p)) return e;
  if (auto e = get_int(f, "seed", INT64_MIN, INT64_MAX, seed)) return e;
  if (auto e = get_number(f, "repetition_penalty", 1e-3, 10, s.repeat_penalty)) return e;
  if (auto e = get_number(f, "frequency_penalty", -2, 2, s.frequency_penalty)) return e;
  if (auto e = get_number(f, "presence_penalty", -2, 2, s.presence_penalty)) return e;
  s.top_k = top_k < 0 ? 0 : static_cast<int>(top_k);
  s.seed = seeded ? static_cast<uint64_t>(seed) : std::random_device{}();
  return std::nullopt;
}

MaybeError logprobs(Fields& f, bool chat, int& out) {
  int64_t k = -1;
  if (chat) {
    bool on = false;
    if (auto e = get_bool(f, "logprobs", on)) return e;
    if (auto e = get_int(f, "top_logprobs", 0, 20, k)) return e;
    if (k >= 0 && !on) return bad_request("'top_logprobs' needs 'logprobs': true", "top_logprobs");
    out = on ? static_cast<int>(std::max<int64_t>(k, 0)) : -1;
  } else {
    if (auto e = get_int(f, "logprobs", 0, 20, k)) return e;
    out = static_cast<int>(k);
  }
  return std::nullopt;
}

MaybeError stream_fields(Fields& f, GenRequest& out) {
  if (auto e = get_bool(f, "stream", out.stream)) return e;
  const json* so = f.get("stream_options");
  if (!so) return std::nullopt;
  if (!out.stream)
    return bad_request("'stream_options' is only allowed with 'stream': true", "stream_options");
  if (!so->is_object()) return bad_request("'stream_options' must be an object", "stream_options");
  for (const auto& [k, v] : so->items()) {
    if (k != "include_usage" || !v.is_boolean())
      return bad_request("'stream_options' takes only a boolean 'include_usage'", "stream_options");
    out.include_usage = v.get<bool>();
  }
  return std::nullopt;
}

// Fields of vLLM's and SGLang's request schemas that vllm-router and sglang-router add to
// every request they forward, with their defaults. Each is accepted when it asks for what
// turbokv does anyway and refused by name otherwise. turbokv has no reasoning parser, so
// the reasoning switches change nothing and take either value.
MaybeError router_extensions(Fields& f, bool chat) {
  struct Fixed {
    const char* key;
    bool value;  // the one value turbokv serves
    bool chat_only;
  };
  static constexpr Fixed kFixed[] = {
      {"skip_special_tokens", true, false},
      {"no_stop_trim", false, false},
      {"return_hidden_states", false, false},
      {"continue_final_message", false, true},
  };
  for (const Fixed& x : kFixed) {
    if (x.chat_only && !chat) continue;
    bool v = x.value;
    if (auto e = get_bool(f, x.key, v)) return e;
    if (v != x.value)
      return bad_request(std::string("'") + x.key + "': " + (v ? "true" : "false") +
                             " is not supported (turbokv serves only " +
                             (x.value ? "true" : "false") + ")",
                         x.key);
  }
  if (!chat) {
    bool echo = false;
    if (auto e = get_bool(f, "echo", echo)) return e;
    if (echo) return bad_request("'echo': true is not supported", "echo");
    return std::nullopt;
  }
  for (const char* key : {"separate_reasoning", "stream_reasoning", "include_reasoning"}) {
    bool ignored = false;
    if (auto e = get_bool(f, key, ignored)) return e;
  }
  return std::nullopt;
}

}  // namespace

MaybeError parse_body(const std::string& text, nlohmann::json& out) {
  try {
    out = json::parse(text);
  } catch (const json::parse_error& e) {
    return bad_request(std::string("malformed JSON body: ") + e.what());
  }
  if (!out.is_object()) return bad_request("the request body must be a JSON object");
  return std::nullopt;
}

MaybeError parse_gen_request(const json& body, bool chat, const turbokv::Engine& eng,
                             GenRequest& out) {
  Fields f(body);
  out.chat = chat;
  turbokv::Request& r = out.req;
  if (const json* m = f.get("model"); m && !m->is_string())
    return bad_request("'model' must be a string", "model");
  if (const json* u = f.get("user"); u && !u->is_string())
    return bad_request("'user' must be a string", "user");
  int64_t max_tokens = -1, n = 1;
  if (auto e = get_int(f, "max_tokens", 1, INT32_MAX, max_tokens)) return e;
  if (chat) {
    if (auto e = get_int(f, "max_completion_tokens", 1, INT32_MAX, max_tokens)) return e;
  }
  if (auto e = get_int(f, "n", 1, 16, n)) return e;
  if (auto e = sampling(f, r.sampling)) return e;
  if (auto e = stop_strings(f, r.stop)) return e;
  if (auto e = logprobs(f, chat, out.logprobs)) return e;
  if (auto e = stream_fields(f, out)) return e;
  if (auto e = get_bool(f, "ignore_eos", r.ignore_eos)) return e;  // vLLM's extension
  if (auto e = router_extensions(f, chat)) return e;
  int64_t id_slot = -1;  // llama.cpp's extension; the range is the slot table's to check
  if (auto e = get_int(f, "id_slot", -1, INT32_MAX, id_slot)) return e;
  out.id_slot = static_cast<int>(id_slot);
  // Cheap checks first: unknown fields fail before the prompt is tokenized.
  const char* prompt_key = chat ? "messages" : "prompt";
  f.get(prompt_key);
  if (auto e = f.unknown()) return e;
  if (auto e =
          chat ? chat_prompt(f, eng, r.prompt_tokens) : completion_prompt(f, eng, r.prompt_tokens))
    return e;
  const int64_t ctx = eng.config().context, np = static_cast<int64_t>(r.prompt_tokens.size());
  if (np == 0) return bad_request("the prompt is empty (no tokens)", prompt_key);
  if (np >= ctx) {
    ApiError e =
        bad_request("the prompt has " + std::to_string(np) + " tokens but the context is " +
                        std::to_string(ctx) + " tokens (a prompt may have at most " +
                        std::to_string(ctx - 1) + " tokens, leaving room to generate)",
                    prompt_key);
    e.code = "context_length_exceeded";
    return e;
  }
  r.max_tokens = max_tokens;  // -1: until an end, a stop or the context
  r.logprobs = out.logprobs;
  out.n = static_cast<int>(n);
  return std::nullopt;
}

}  // namespace tkv::server
