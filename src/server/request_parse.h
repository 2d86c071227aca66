// OpenAI request bodies -> turbokv::Request: every field typed and range checked
// before any work, unknown fields refused (400 naming the field). The prompt is
// tokenized here so its length is known (context check, usage) before submit.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/api_error.h"
#include "turbokv/engine.h"

namespace tkv::server {

struct GenRequest {
  bool chat = false;
  turbokv::Request req;  // prompt_tokens filled, sampling mapped
  int n = 1;             // choices, forked from one prefill
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  int logprobs = -1;           // top-k alternatives per token; < 0: no logprobs
  int id_slot = -1;            // llama.cpp's id_slot: run on this slot; < 0: any free one
};

// Parses a /v1/chat/completions (chat) or /v1/completions body; the error names
// the field. The prompt must leave room for one generated token in the context.
MaybeError parse_gen_request(const nlohmann::json& body, bool chat, const turbokv::Engine& eng,
                             GenRequest& out);

// Parses a body as a JSON object (400 with the parser's message otherwise).
MaybeError parse_body(const std::string& text, nlohmann::json& out);

}  // namespace tkv::server
