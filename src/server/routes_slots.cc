// GET /slots and POST /slots/{id}?action=save|restore|erase in llama.cpp's
// shapes (slots.h says what a slot's KV is here). Save and restore need
// --slot-save-path (else 501, as llama-server); file names stay inside it.
// Both run one short request on the engine: save re-runs the slot's tokens with
// save_session (cached pages reused), restore loads the snapshot with
// load_session (checked at submit: another model or scheme is refused with the
// kv-store's reason and the slot is left as it was).
#include <httplib.h>
#include <sys/stat.h>

#include <chrono>

#include "server/request_parse.h"
#include "server/routes.h"

namespace tkv::server {
namespace {

using nlohmann::json;

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

int64_t file_bytes(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<int64_t>(st.st_size) : 0;
}

// One greedy token after tokens, so that their KV is computed (or loaded).
turbokv::Request kv_request(std::vector<int32_t> tokens) {
  turbokv::Request r;
  r.prompt_tokens = std::move(tokens);
  r.max_tokens = 1;
  r.sampling.temperature = 0;
  return r;
}

// A file that is not a usable snapshot is the client's input: 400 with the
// kv-store's reason.
ApiError engine_error(const Status& st) {
  const StatusCode c = st.code();
  const bool bad = c == StatusCode::kInvalidArgument || c == StatusCode::kDataLoss ||
                   c == StatusCode::kOutOfRange || c == StatusCode::kUnimplemented ||
                   c == StatusCode::kNotFound;
  return ApiError{bad ? 400 : 500, st.message(), bad ? "invalid_request_error" : "server_error", "",
                  ""};
}

MaybeError save(ServerState& s, int id, Slot& slot, const std::string& path, json& out) {
  if (slot.tokens.empty())
    return bad_request("slot " + std::to_string(id) + " holds no tokens to save");
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<int32_t> tokens = slot.tokens;
  const auto max_tokens = static_cast<size_t>(s.eng().config().context - 1);
  if (tokens.size() > max_tokens) tokens.resize(max_tokens);  // a run that filled the context
  turbokv::Request r = kv_request(std::move(tokens));
  r.save_session = path;
  if (!slot.snapshot.empty()) {  // restored and not run since: its pages, not a prefill
    r.load_session = slot.snapshot;
    r.load_session_common = true;
  }
  auto h = s.eng().submit(r);
  if (!h.ok() && !r.load_session.empty()) {  // the restored file changed since: compute
    r.load_session.clear();
    h = s.eng().submit(r);
  }
  if (!h.ok()) return engine_error(h.status());
  const turbokv::Event e = h.value().wait();
  if (!e.session_error.empty())
    return ApiError{500, e.session_error, "server_error", "", "slot_save_failed"};
  out["n_saved"] = e.session_tokens;
  out["n_written"] = file_bytes(path);
  out["timings"] = {{"save_ms", ms_since(t0)}};
  return std::nullopt;
}

MaybeError restore(ServerState& s, Slot& slot, const std::string& name, const std::string& path,
                   json& out) {
  const auto t0 = std::chrono::steady_clock::now();
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    return ApiError{404, "no snapshot '" + name + "' in --slot-save-path", "not_found_error",
                    "filename", "not_found"};
  auto info = turbokv::inspect_snapshot(path);
  if (!info.ok()) return engine_error(info.status());
  const int64_t ctx = s.eng().config().context;
  if (info.value().n_tokens >= ctx)
    return bad_request("the snapshot holds " + std::to_string(info.value().n_tokens) +
                       " tokens but the context is " + std::to_string(ctx) + " tokens");
  if (info.value().n_tokens > 0) {
    // Checked completely at submit (model, scheme, bits, checksums); its pages are
    // then loaded, not prefilled, and shared through the prefix cache.
    turbokv::Request r = kv_request(info.value().tokens);
    r.load_session = path;
    auto h = s.eng().submit(r);
    if (!h.ok()) return engine_error(h.status());
    const turbokv::Event e = h.value().wait();
    if (e.finish == turbokv::FinishReason::kError || e.finish == turbokv::FinishReason::kCancelled)
      return ApiError{500, "restoring '" + name + "' ended: " + e.error, "server_error", "", ""};
  }
  slot.tokens = info.value().tokens;
  slot.snapshot = info.value().n_tokens > 0 ? path : std::string();
  out["n_restored"] = info.value().n_tokens;
  out["n_read"] = static_cast<int64_t>(info.value().file_bytes);
  out["timings"] = {{"restore_ms", ms_since(t0)}};
  return std::nullopt;
}

// The body's "filename" (and nothing else) as a path inside --slot-save-path.
MaybeError file_arg(const ServerState& s, const httplib::Request& req, std::string* name,
                    std::string* path) {
  json body;
  if (auto e = parse_body(req.body, body)) return e;
  for (const auto& [k, v] : body.items())
    if (k != "filename") return bad_request("unknown field '" + k + "'", k);
  if (!body.contains("filename") || !body["filename"].is_string())
    return bad_request("'filename' (a string) is required", "filename");
  *name = body["filename"].get<std::string>();
  return slot_file_path(s.opts.slot_save_path, *name, path);
}

void slot_action(ServerState& s, const httplib::Request& req, httplib::Response& res) {
  const std::string id_text = req.matches[1];
  const std::string action = req.get_param_value("action");
  if (action != "save" && action != "restore" && action != "erase")
    return fail(s, res,
                bad_request("unknown slot action '" + action + "' (valid: save, restore, erase)",
                            "action"));
  if (action != "erase" && s.opts.slot_save_path.empty())
    return fail(s, res,
                ApiError{501,
                         "slot save and restore are off: start the server with --slot-save-path "
                         "DIR",
                         "not_supported_error", "", "not_supported"});
  if (id_text.empty() || id_text.size() > 9 ||
      id_text.find_first_not_of("0123456789") != std::string::npos)
    return fail(s, res, bad_request("slot id '" + id_text + "' is not a number", "id_slot"));
  const int id = std::stoi(id_text);
  std::string name, path;
  if (action != "erase")
    if (auto e = file_arg(s, req, &name, &path)) return fail(s, res, *e);
  Slot slot;
  if (auto e = s.slots->take(id, &slot)) return fail(s, res, *e);
  json out = {{"id_slot", id}};
  MaybeError err;
  Slot next = slot;
  if (action == "save") {
    err = save(s, id, next, path, out);
  } else if (action == "restore") {
    err = restore(s, next, name, path, out);
  } else {
    out["n_erased"] = slot.tokens.size();
    next = Slot{};
  }
  if (action != "erase") out["filename"] = name;
  s.slots->put(id, err ? slot : next);  // a failed action leaves the slot as it was
  if (err) return fail(s, res, *err);
  send_json(res, out);
}

}  // namespace

void add_slot_routes(httplib::Server& http, ServerState& s) {
  http.Get("/slots", [&s](const httplib::Request&, httplib::Response& res) {
    send_json(res, s.slots->list());
  });
  http.Post(R"(/slots/([^/]*))", [&s](const httplib::Request& req, httplib::Response& res) {
    slot_action(s, req, res);
  });
}

}  // namespace tkv::server
