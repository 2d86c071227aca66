// The two token streams of an evaluation (eval.h): how the corpus becomes
// prompts/chunks, and how each is fed through Engine::score, handing every
// scored next-token distribution to a callback in a fixed order.
#pragma once
#include <functional>
#include <vector>

#include "eval/eval.h"

namespace tkv::eval {

// Called for every scored position: logits [n_vocab], the token that follows.
// After its first error the remaining positions are skipped and that error returned.
using PositionFn = std::function<Status(const float* logits, int32_t target)>;
// Called after each forward pass with (tokens done, tokens total) of this scheme.
using WorkFn = std::function<void(int64_t, int64_t)>;

// Corpus tokens for the protocol (llama.cpp: add_special = true, parse_special = false).
std::vector<int32_t> corpus_tokens(const turbokv::Tokenizer& tok, const std::string& text);

// Number of positions that will be scored, or an error if the corpus is too short.
Result<int64_t> planned_positions(const EvalOptions& o, int64_t n_corpus);
// Tokens fed through the model per scheme (for progress and ETA).
int64_t planned_work(const EvalOptions& o);

Status run_wikitext(turbokv::Engine& eng, const std::vector<int32_t>& corpus, const EvalOptions& o,
                    const PositionFn& on_pos, const WorkFn& on_work);
Status run_serving_kl(turbokv::Engine& eng, const std::vector<int32_t>& corpus,
                      const EvalOptions& o, const PositionFn& on_pos, const WorkFn& on_work);

}  // namespace tkv::eval
