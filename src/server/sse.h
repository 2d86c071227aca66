// Server-sent events on an httplib chunked response: "data: JSON\n\n" frames,
// ": comment" keep-alives and the closing "data: [DONE]". Every write returns
// false once the client is gone.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

namespace httplib {
class DataSink;
}

namespace tkv::server {

bool sse_data(httplib::DataSink& sink, const nlohmann::json& j);
bool sse_comment(httplib::DataSink& sink, const std::string& text);
bool sse_done(httplib::DataSink& sink);

}  // namespace tkv::server
