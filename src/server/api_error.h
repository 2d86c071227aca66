// Errors in OpenAI's shape: {"error": {"message", "type", "param", "code"}} with
// the HTTP status that goes with them (400 invalid_request_error, 401
// authentication_error, 404 not_found_error, 413, 429 rate_limit_error, 5xx).
#pragma once
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace httplib {
struct Response;
}

namespace tkv::server {

struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // the offending field, if one
  std::string code;
};

inline ApiError bad_request(std::string msg, std::string param = "") {
  return ApiError{400, std::move(msg), "invalid_request_error", std::move(param), ""};
}

nlohmann::json error_json(const ApiError& e);
// Sets status, the JSON body and, for 429/503, Retry-After.
void send_error(httplib::Response& res, const ApiError& e);
// JSON text that never throws on invalid UTF-8 (token pieces can split a character).
std::string dump_json(const nlohmann::json& j);
void send_json(httplib::Response& res, const nlohmann::json& j, int status = 200);

using MaybeError = std::optional<ApiError>;

}  // namespace tkv::server
