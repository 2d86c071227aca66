// GET / (the chat page), /health, /v1/models, /metrics; POST /tokenize and
// /detokenize in llama.cpp's shapes ({"content"} -> {"tokens"} and back).
#include <httplib.h>

#include "web_index_html.h"  // generated from web/index.html

#include "server/request_parse.h"
#include "server/routes.h"

namespace tkv::server {
namespace {

using nlohmann::json;

void tokenize(ServerState& s, const httplib::Request& req, httplib::Response& res) {
  json body;
  if (auto e = parse_body(req.body, body)) return fail(s, res, *e);
  bool add_special = false;
  for (const auto& [k, v] : body.items()) {
    if (k == "content" && v.is_string()) continue;
    if (k == "add_special" && v.is_boolean()) {
      add_special = v.get<bool>();
      continue;
    }
    if (k == "content" || k == "add_special")
      return fail(s, res, bad_request("'" + k + "' has the wrong type", k));
    return fail(s, res, bad_request("unknown field '" + k + "'", k));
  }
  if (!body.contains("content"))
    return fail(s, res, bad_request("'content' is required", "content"));
  const auto ids =
      s.eng().tokenizer().encode(body["content"].get<std::string>(), add_special, true);
  send_json(res, {{"tokens", ids}});
}

void detokenize(ServerState& s, const httplib::Request& req, httplib::Response& res) {
  json body;
  if (auto e = parse_body(req.body, body)) return fail(s, res, *e);
  for (const auto& [k, v] : body.items())
    if (k != "tokens") return fail(s, res, bad_request("unknown field '" + k + "'", k));
  if (!body.contains("tokens") || !body["tokens"].is_array())
    return fail(s, res, bad_request("'tokens' must be a list of token ids", "tokens"));
  const int32_t nv = s.eng().tokenizer().n_vocab();
  std::vector<int32_t> ids;
  for (const json& t : body["tokens"]) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= nv)
      return fail(
          s, res,
          bad_request("token ids must be integers from 0 to " + std::to_string(nv - 1), "tokens"));
    ids.push_back(t.get<int32_t>());
  }
  send_json(res, {{"content", s.eng().tokenizer().decode(ids)}});
}

json models(const ServerState& s) {
  const auto& mi = s.eng().model_info();
  const auto kv = s.eng().kv_info();
  json m = {{"id", s.opts.model_id},
            {"object", "model"},
            {"created", static_cast<int64_t>(s.started)},
            {"owned_by", "turbokv"},
            {"meta",
             {{"name", mi.name},
              {"arch", mi.arch},
              {"kv_scheme", kv.scheme},
              {"kv_bytes_per_token", kv.bytes_per_token},
              {"context", kv.context},
              {"n_vocab", mi.n_vocab}}}};
  return {{"object", "list"}, {"data", json::array({m})}};
}

}  // namespace

void fail(ServerState& s, httplib::Response& res, const ApiError& e) {
  s.metrics->on_http_error(e.status);
  send_error(res, e);
}

void add_misc_routes(httplib::Server& http, ServerState& s) {
  http.Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(reinterpret_cast<const char*>(kWebIndexHtml), kWebIndexHtmlSize,
                    "text/html; charset=utf-8");
  });
  http.Get("/health", [&s](const httplib::Request&, httplib::Response& res) {
    if (s.ready())
      send_json(res, {{"status", "ok"}});
    else
      send_json(res, {{"status", "loading"}}, 503);
  });
  http.Get("/v1/models",
           [&s](const httplib::Request&, httplib::Response& res) { send_json(res, models(s)); });
  http.Get("/metrics", [&s](const httplib::Request&, httplib::Response& res) {
    KvEventsStats kv;
    if (s.kv_events) kv = s.kv_events->stats();
    res.set_content(s.metrics->render(s.eng(), s.kv_events ? &kv : nullptr),
                    "text/plain; version=0.0.4");
  });
  http.Post("/tokenize",
            [&s](const httplib::Request& req, httplib::Response& res) { tokenize(s, req, res); });
  http.Post("/detokenize",
            [&s](const httplib::Request& req, httplib::Response& res) { detokenize(s, req, res); });
}

}  // namespace tkv::server
