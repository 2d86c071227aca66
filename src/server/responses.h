// Response JSON in the shapes the openai client parses: chat.completion /
// chat.completion.chunk and text_completion, their logprobs and usage.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/request_parse.h"

namespace tkv::server {

// "stop" | "length" for the API's finish reasons (an error or a cancel: null).
const char* openai_finish(turbokv::FinishReason f);

struct ChoiceResult {
  std::string text;
  nlohmann::json logprobs;  // chat: list of content entries; completions: the 4 lists
  turbokv::FinishReason finish = turbokv::FinishReason::kNone;
  int64_t tokens = 0;        // streamed (generated) tokens
  turbokv::Timings timings;  // the final event's (cached_tokens: the prompt reused)
};

class ResponseBuilder {
 public:
  ResponseBuilder(const GenRequest& g, const turbokv::Engine& eng, std::string model_id);
  // Appends one token's logprobs to acc (empty object/array first).
  void add_logprobs(const turbokv::Event& e, int64_t text_offset, nlohmann::json& acc) const;
  nlohmann::json empty_logprobs() const;
  // Stream chunks. delta_chunk: text (chat: first with the role), logprobs or null.
  nlohmann::json delta_chunk(int index, const std::string& text, const nlohmann::json& logprobs,
                             bool with_role) const;
  nlohmann::json finish_chunk(int index, turbokv::FinishReason f, const turbokv::Timings& t) const;
  nlohmann::json usage_chunk(const nlohmann::json& usage) const;
  // The non-streamed body.
  nlohmann::json full(const std::vector<ChoiceResult>& choices, const nlohmann::json& usage) const;
  nlohmann::json usage(const std::vector<ChoiceResult>& choices) const;
  // llama-server's `timings` object (prompt_n/ms, predicted_n/ms and their rates, cache_n,
  // draft_n, draft_n_accepted) from one choice's engine timings.
  static nlohmann::json timings(const turbokv::Timings& t);

 private:
  nlohmann::json envelope(bool chunk) const;
  const GenRequest& g_;
  const turbokv::Engine& eng_;
  std::string model_id_, id_;
  int64_t created_;
};

}  // namespace tkv::server
