// API keys: "Authorization: Bearer KEY", compared in constant time.
#pragma once
#include <string>

namespace httplib {
struct Request;
}

namespace tkv::server {

bool authorized(const httplib::Request& req, const std::string& api_key);

}  // namespace tkv::server
