// What the engine loop is asked to do (a generation or a scoring pass over
// tokens) and what it reports back: streamed events, the finish reason and
// timings. src/api maps the public types (include/turbokv/request.h) onto these.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kvcache/kv_store.h"
#include "runtime/spec/drafter.h"
#include "sampling/sampler.h"

namespace tkv::runtime {

enum class Finish {
  kNone,         // still running
  kLength,       // max_tokens generated (or a scoring pass done)
  kEos,          // an end-of-generation token (not streamed)
  kStopString,   // a stop string (the text ends before it)
  kStopToken,    // a stop token id (not streamed)
  kCancelled,    // cancel(), or the engine shut down
  kContextFull,  // the sequence reached the context
  kError,        // Event::error says why
};
const char* finish_name(Finish f);  // "length" | "eos" | "stop" | ... | "error"

struct Timings {
  double queue_ms = 0;           // submit -> first admission
  double ttft_ms = 0;            // submit -> first token
  double prefill_ms = 0;         // first admission -> first token
  int64_t prefill_tokens = 0;    // tokens run as prefill (recomputation after preemption included)
  int64_t cached_tokens = 0;     // prompt tokens reused from the prefix cache
  int64_t generated_tokens = 0;  // tokens sampled (an end or stop token included)
  int64_t decode_tokens = 0;     // tokens sampled after the first
  double decode_ms = 0;          // first token -> finish
  int64_t preemptions = 0;
  int64_t drafted_tokens = 0;   // speculative draft tokens verified
  int64_t accepted_tokens = 0;  // ... of which the target kept (each saved a step)
  double decode_tok_s() const { return decode_ms > 0 ? decode_tokens * 1000.0 / decode_ms : 0; }
};

// One streamed item: a sampled token and the text it released (text may lag
// the token while a stop string is still possible, and then come in one
// piece), or the final event (finish != kNone) with what text was held back.
struct Event {
  int32_t token = -1;  // -1 on the final event
  std::string text;
  Finish finish = Finish::kNone;
  std::string error;  // kError only
  Timings timings;    // final event only
  // With SeqRequest::logprobs >= 0 (token events): log-softmax of the raw
  // logits at token, and the SeqRequest::logprobs most likely tokens.
  float logprob = 0.0f;
  std::vector<sampling::TokenLogprob> top_logprobs;
  // Final event of a request with save_session: why the snapshot was not
  // written (empty = written), and the tokens it holds.
  std::string session_error;
  int64_t session_tokens = 0;
};

// Rows [rows, n_vocab] of teacher-forced logits for positions [pos0, pos0 + rows).
using LogitsFn = std::function<void(int64_t pos0, int64_t rows, const float* logits)>;

inline constexpr int kMaxLogprobs = 20;  // top alternatives a token event may carry

struct SeqRequest {
  std::vector<int32_t> prompt;  // >= 1 token, at most the context
  sampling::SamplerParams sampling;
  std::vector<std::string> stop_strings;
  std::vector<int32_t> stop_tokens;
  int64_t max_tokens = 128;  // < 0: until an end, a stop or the context
  int priority = 0;          // higher first; FCFS within a priority
  bool ignore_eos = false;
  int logprobs = -1;       // < 0: off; k in [0, 20]: each token's logprob and the top k
  spec::SpecOptions spec;  // speculative decoding (generation only)
  // Called on the engine thread for every event instead of queueing it.
  std::function<void(const Event&)> on_event;
  // Called on the engine thread after each prefill chunk: (tokens in, tokens to prefill).
  std::function<void(int64_t, int64_t)> on_progress;
  // Scoring: no sampling, every position's logits go to on_logits, chunk by chunk.
  LogitsFn on_logits;
  // Scoring: positions before logits_from are prefilled without logits (one
  // chunk ends there); from there on at most tokens_per_step tokens per forward
  // step (0 = as many as the step budget allows; 1 = the decode path).
  int64_t logits_from = 0;
  int64_t tokens_per_step = 0;
  // KV snapshots (kvcache/kv_store.h), generation only. save_session: written
  // when the request ends (its KV: every token but the last sampled one).
  // load_session: read and checked at submit (file, compatibility, its tokens a
  // prefix of the prompt, or with load_common only the tokens both start with);
  // its pages replace prefilling those tokens at admission.
  std::string save_session;
  std::string load_session;
  bool load_common = false;
  std::shared_ptr<const kv::Snapshot> loaded;  // set by submit from load_session
};

}  // namespace tkv::runtime
