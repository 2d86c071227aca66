// Route registration on the httplib server; each routes_*.cc adds its own.
#pragma once
#include "server/api_error.h"
#include "server/state.h"

namespace httplib {
class Server;
struct Response;
}  // namespace httplib

namespace tkv::server {

// POST /v1/chat/completions and /v1/completions (streamed or not).
void add_openai_routes(httplib::Server& http, ServerState& s);
// GET /, /health, /v1/models, /metrics; POST /tokenize, /detokenize.
void add_misc_routes(httplib::Server& http, ServerState& s);
// GET /slots, POST /slots/{id}?action=save|restore|erase.
void add_slot_routes(httplib::Server& http, ServerState& s);
// send_error + the error counter of /metrics.
void fail(ServerState& s, httplib::Response& res, const ApiError& e);

}  // namespace tkv::server
