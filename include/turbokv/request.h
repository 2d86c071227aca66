// A generation request and what comes back: streamed events (token, text),
// the finish reason and timings. Requests go to Engine::submit (engine.h).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "turbokv/status.h"

namespace turbokv {

struct ChatMessage {
  std::string role;  // "system" | "user" | "assistant"
  std::string content;
};

// Token sampling; temperature 0 is greedy. Ranges are checked at submit.
struct SamplingParams {
  float temperature = 0.8f;
  int top_k = 40;               // <= 0: off
  float top_p = 0.95f;          // >= 1: off
  float min_p = 0.05f;          // <= 0: off
  float repeat_penalty = 1.0f;  // 1: off
  int repeat_last_n = 64;       // -1: whole history, 0: off
  // OpenAI-style penalties over the tokens generated so far (not the prompt):
  // logit -= frequency_penalty * count + presence_penalty * (count > 0).
  float frequency_penalty = 0.0f;  // 0: off; [-2, 2]
  float presence_penalty = 0.0f;   // 0: off; [-2, 2]
  uint64_t seed = 0;
};

// The check submit runs, for callers that want to refuse bad values before loading a
// model (the CLI): the message names the field, its value and its range.
Status validate(const SamplingParams& p);

// Speculative decoding: a drafter guesses the next tokens, the model checks
// them all in one forward step and keeps those it would have produced itself
// (greedy: exactly its tokens; sampling: the same distribution). Per request,
// so speculative and plain requests share the engine's batches. Ranges are
// checked at submit.
enum class SpecKind {
  kNone,
  kNgram,  // prompt lookup: continue an earlier occurrence of the last tokens
  kDraft,  // the engine's draft model (EngineConfig::draft_model_path) guesses greedily
};
struct SpecParams {
  SpecKind kind = SpecKind::kNone;
  int max_draft = 8;  // [1, 32]: most draft tokens a step (adapted to the acceptance rate)
  int ngram_max = 3;  // [1, 8]: ngram: longest suffix matched first ...
  int ngram_min = 1;  // [1, ngram_max]: ... down to this length
};

// A token and its log-probability under the model's distribution (log-softmax
// of the raw logits, before temperature and truncation).
struct TokenLogprob {
  int32_t token = -1;
  float logprob = 0.0f;
};

enum class FinishReason {
  kNone,         // not finished
  kLength,       // max_tokens generated (a scoring pass: done)
  kEos,          // the model's end-of-generation token (not streamed)
  kStopString,   // a stop string: the text ends right before it
  kStopToken,    // one of stop_tokens (not streamed)
  kCancelled,    // RequestHandle::cancel, or the engine was destroyed
  kContextFull,  // the sequence filled the context
  kError,        // Event::error says why
};
const char* finish_reason_name(FinishReason r);

struct Timings {
  double queue_ms = 0;           // submit -> first scheduled
  double ttft_ms = 0;            // submit -> first token
  double prefill_ms = 0;         // first scheduled -> first token
  int64_t prefill_tokens = 0;    // tokens prefilled (recomputation after preemption included)
  int64_t cached_tokens = 0;     // prompt tokens reused from the prefix cache
  int64_t generated_tokens = 0;  // tokens sampled (an end or stop token included)
  int64_t decode_tokens = 0;     // tokens sampled after the first
  double decode_ms = 0;          // first token -> finish
  int64_t preemptions = 0;       // times the request was preempted (KV freed, recomputed)
  int64_t drafted_tokens = 0;    // speculative draft tokens verified
  int64_t accepted_tokens = 0;   // ... of which kept (each one a forward step saved)
  double decode_tok_s() const { return decode_ms > 0 ? decode_tokens * 1000.0 / decode_ms : 0; }
};

// A streamed token with the text it released (text can lag tokens while a stop
// string may still be forming), or the final event: finish != kNone, the text
// held back until then, and the timings.
struct Event {
  int32_t token = -1;  // -1 on the final event
  std::string text;
  // With Request::logprobs >= 0: the sampled token's log-probability, and the
  // Request::logprobs most likely tokens (highest first).
  float logprob = 0.0f;
  std::vector<TokenLogprob> top_logprobs;
  FinishReason finish = FinishReason::kNone;
  std::string error;  // kError only
  Timings timings;    // final event only
  // Final event of a request with save_session: empty when the snapshot was
  // written (session_tokens tokens of KV), else why not.
  std::string session_error;
  int64_t session_tokens = 0;
  bool is_final() const { return finish != FinishReason::kNone; }
};

struct Request {
  std::vector<int32_t> prompt_tokens;  // used as given (BOS included if wanted)
  // When prompt_tokens is empty: rendered with the model's chat template, with
  // the assistant turn opened, then tokenized.
  std::vector<ChatMessage> messages;
  SamplingParams sampling;
  std::vector<std::string> stop;     // stop strings
  std::vector<int32_t> stop_tokens;  // stop token ids
  int64_t max_tokens = 128;          // < 0: until an end, a stop or the context
  int priority = 0;                  // higher first; first come first served within
  bool ignore_eos = false;           // keep going past end-of-generation tokens
  int logprobs = -1;                 // < 0: off; k in [0, 20]: sampled token's logprob + top k
  SpecParams spec;                   // speculative decoding (off by default)
  // KV snapshots (docs/kv-format.md, "Snapshots"). save_session: when the
  // request ends, its KV (prompt + generated tokens but the last, which has no
  // KV yet) is written atomically to this path; Event::session_error says if not.
  // load_session: a snapshot whose tokens must be a prefix of the prompt; it is
  // checked at submit (model, scheme, bits, shapes, checksums: refused with the
  // reason) and its pages replace prefilling those tokens (Timings::cached_tokens).
  std::string save_session;
  std::string load_session;
  // load_session_common: load only the tokens the snapshot and the prompt share
  // from the start (none is fine) instead of refusing a snapshot that is not a
  // prefix of the prompt (a server slot restored, then sent a shorter prompt).
  bool load_session_common = false;
  // Optional: called for every event on the engine thread (keep it short);
  // events then skip the handle's queue (RequestHandle::next returns false).
  std::function<void(const Event&)> on_token;
  // Optional: called on the engine thread after each prefill chunk with
  // (prompt tokens in the KV, prompt tokens in all), e.g. for a progress bar.
  std::function<void(int64_t done, int64_t total)> on_prefill_progress;
};

}  // namespace turbokv
