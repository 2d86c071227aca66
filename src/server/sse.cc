// SSE framing over httplib's DataSink (see sse.h).
#include "server/sse.h"

#include <httplib.h>

#include "server/api_error.h"

namespace tkv::server {
namespace {
bool put(httplib::DataSink& sink, const std::string& s) {
  return sink.write(s.data(), s.size());
}
}  // namespace

bool sse_data(httplib::DataSink& sink, const nlohmann::json& j) {
  return put(sink, "data: " + dump_json(j) + "\n\n");
}

bool sse_comment(httplib::DataSink& sink, const std::string& text) {
  return put(sink, ": " + text + "\n\n");
}

bool sse_done(httplib::DataSink& sink) {
  return put(sink, "data: [DONE]\n\n");
}

}  // namespace tkv::server
