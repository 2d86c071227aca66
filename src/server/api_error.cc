// OpenAI-shaped error bodies and JSON responses (see api_error.h).
#include "server/api_error.h"

#include <httplib.h>

namespace tkv::server {

nlohmann::json error_json(const ApiError& e) {
  nlohmann::json err = {{"message", e.message}, {"type", e.type}};
  err["param"] = e.param.empty() ? nlohmann::json(nullptr) : nlohmann::json(e.param);
  err["code"] = e.code.empty() ? nlohmann::json(nullptr) : nlohmann::json(e.code);
  return {{"error", err}};
}

std::string dump_json(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void send_json(httplib::Response& res, const nlohmann::json& j, int status) {
  res.status = status;
  res.set_content(dump_json(j), "application/json");
}

void send_error(httplib::Response& res, const ApiError& e) {
  if (e.status == 429 || e.status == 503) res.set_header("Retry-After", "1");
  send_json(res, error_json(e), e.status);
}

}  // namespace tkv::server
