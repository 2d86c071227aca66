// Sequence: one request's state inside the engine loop. tokens holds the
// prompt and every sampled token; the scheduler knows how many of them are in
// the KV cache. After a preemption the KV sequence is gone (kv = -1) and all
// of tokens is prefilled again, so the text already streamed stays valid.
#pragma once
#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/request_state.h"
#include "runtime/scheduler.h"
#include "runtime/spec/drafter.h"
#include "runtime/stop_stream.h"
#include "sampling/sampler.h"

namespace tkv::runtime {

struct Sequence {
  Sequence(SeqId id_, SeqRequest r, std::shared_ptr<RequestState> st, double now_ms)
      : id(id_),
        req(std::move(r)),
        state(std::move(st)),
        tokens(req.prompt),
        n_prompt(static_cast<int64_t>(req.prompt.size())),
        sampler(req.sampling),
        stop(req.stop_strings, [this](const std::string& s) { text += s; }),
        submit_ms(now_ms),
        drafter(spec::make_drafter(req.spec)),
        spec_k(std::max(1, req.spec.max_draft / 2)) {}
  Sequence(const Sequence&) = delete;
  Sequence& operator=(const Sequence&) = delete;

  bool scoring() const { return static_cast<bool>(req.on_logits); }
  int64_t n_generated() const { return static_cast<int64_t>(tokens.size()) - n_prompt; }

  SeqId id;
  SeqRequest req;
  std::shared_ptr<RequestState> state;
  std::vector<int32_t> tokens;  // prompt + sampled
  int64_t n_prompt = 0;
  int kv = -1;  // KV cache sequence while admitted
  sampling::Sampler sampler;
  std::string text;  // released by `stop`, not yet sent
  StopStream stop;
  Timings timings;
  double submit_ms = 0, admit_ms = -1, first_token_ms = -1;
  // Speculative decoding: the drafter (null when off), its last proposal (the
  // scheduler may verify fewer), the draft length it asks for now (adapted to
  // the acceptance rate) and the verify chunk's tokens (last token + drafts).
  std::unique_ptr<spec::Drafter> drafter;
  std::vector<int32_t> draft;
  int spec_k = 1;
  std::vector<int32_t> verify_tokens;
};

}  // namespace tkv::runtime
