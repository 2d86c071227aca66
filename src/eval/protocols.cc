// Token streams of the two protocols (protocols.h). wikitext mirrors llama.cpp
// tools/perplexity (chunk i = tokens [i*n_ctx, (i+1)*n_ctx), BOS written over the
// first token when the vocab adds one, positions n_ctx/2 .. n_ctx-2 scored);
// serving-kl takes n_prompts windows spread evenly over the corpus. Each chunk or
// prompt is one Engine::score pass on a fresh sequence.
#include "eval/protocols.h"

#include <algorithm>

namespace tkv::eval {
namespace {
// Second-half logits are produced this many positions per forward step (bounds
// memory: 128 x 262144 vocab x 4 B = 128 MiB for Gemma 3).
constexpr int64_t kLogitPiece = 128;

int64_t serving_window(const EvalOptions& o) {
  return int64_t{o.prefix_tokens} + o.decode_steps + 1;
}

// Scores tokens through eng (positions from opts.logits_from on): row i of a
// chunk at pos0 predicts tokens[pos0 + i + 1], or `last` past the end. The first
// error of on_pos skips the rest and is returned.
Status score_span(turbokv::Engine& eng, const std::vector<int32_t>& tokens, int32_t last,
                  const turbokv::ScoreOptions& opts, const PositionFn& on_pos,
                  const std::function<void(int64_t pos_end)>& on_chunk) {
  const int64_t nv = eng.model_info().n_vocab, n = static_cast<int64_t>(tokens.size());
  Status err;
  TKV_RETURN_IF_ERROR(eng.score(
      tokens,
      [&](int64_t pos0, int64_t rows, const float* logits) {
        for (int64_t j = 0; j < rows && err.ok(); ++j) {
          const int64_t next = pos0 + j + 1;
          err = on_pos(logits + j * nv, next < n ? tokens[static_cast<size_t>(next)] : last);
        }
        if (err.ok() && on_chunk) on_chunk(pos0 + rows);
      },
      opts));
  return err;
}
}  // namespace

std::vector<int32_t> corpus_tokens(const turbokv::Tokenizer& tok, const std::string& text) {
  return tok.encode(text, /*add_special=*/true, /*parse_special=*/false);
}

Result<int64_t> planned_positions(const EvalOptions& o, int64_t n_corpus) {
  if (o.protocol == Protocol::kWikitext) {
    if (o.n_ctx < 4) return invalid_argument("[eval] n_ctx {} too small", o.n_ctx);
    const int64_t n_chunks = std::min<int64_t>(o.n_chunks, n_corpus / o.n_ctx);
    if (n_chunks < 1)
      return invalid_argument("[eval] corpus of {} tokens is shorter than n_ctx {}", n_corpus,
                              o.n_ctx);
    return n_chunks * (o.n_ctx - 1 - o.n_ctx / 2);
  }
  if (o.prefix_tokens < 1 || o.decode_steps < 1 || o.n_prompts < 1)
    return invalid_argument("[eval] serving-kl needs prompts, prefix and decode steps >= 1");
  if (n_corpus < serving_window(o))
    return invalid_argument("[eval] corpus of {} tokens is shorter than one prompt ({})", n_corpus,
                            serving_window(o));
  return int64_t{o.n_prompts} * o.decode_steps;
}

int64_t planned_work(const EvalOptions& o) {
  if (o.protocol == Protocol::kWikitext) return int64_t{o.n_chunks} * (o.n_ctx - 1);
  return int64_t{o.n_prompts} * (o.prefix_tokens + o.decode_steps);
}

Status run_wikitext(turbokv::Engine& eng, const std::vector<int32_t>& corpus, const EvalOptions& o,
                    const PositionFn& on_pos, const WorkFn& on_work) {
  const turbokv::Tokenizer& tok = eng.tokenizer();
  const int64_t n_chunks =
      std::min<int64_t>(o.n_chunks, static_cast<int64_t>(corpus.size()) / o.n_ctx);
  const int64_t work = n_chunks * (o.n_ctx - 1);
  // The first half is context only; positions n_ctx/2 .. n_ctx-2 predict tokens
  // n_ctx/2+1 .. n_ctx-1, so the chunk's last token is never fed.
  const turbokv::ScoreOptions so{o.n_ctx / 2, kLogitPiece};
  for (int64_t c = 0; c < n_chunks; ++c) {
    const auto begin = corpus.begin() + c * o.n_ctx;
    std::vector<int32_t> fed(begin, begin + o.n_ctx - 1);
    if (tok.add_bos() && tok.bos_id() >= 0) fed[0] = tok.bos_id();
    TKV_RETURN_IF_ERROR(score_span(eng, fed, *(begin + o.n_ctx - 1), so, on_pos, [&](int64_t end) {
      if (on_work) on_work(c * (o.n_ctx - 1) + end, work);
    }));
  }
  return Status();
}

Status run_serving_kl(turbokv::Engine& eng, const std::vector<int32_t>& corpus,
                      const EvalOptions& o, const PositionFn& on_pos, const WorkFn& on_work) {
  const turbokv::Tokenizer& tok = eng.tokenizer();
  const int64_t win = serving_window(o), n = static_cast<int64_t>(corpus.size());
  const int64_t work = planned_work(o), per_prompt = o.prefix_tokens + o.decode_steps;
  // The prefix prefilled without logits, then the serving decode path
  // teacher-forced: one token per forward step, feeding token prefix+s and
  // scoring the prediction of prefix+s+1.
  const turbokv::ScoreOptions so{o.prefix_tokens, 1};
  for (int i = 0; i < o.n_prompts; ++i) {
    const int64_t off = (n - win) * i / o.n_prompts;
    std::vector<int32_t> fed(corpus.begin() + off, corpus.begin() + off + win - 1);
    if (tok.add_bos() && tok.bos_id() >= 0) fed[0] = tok.bos_id();
    TKV_RETURN_IF_ERROR(score_span(eng, fed, corpus[static_cast<size_t>(off + win - 1)], so, on_pos,
                                   [&](int64_t end) {
                                     if (on_work) on_work(i * per_prompt + end, work);
                                   }));
  }
  return Status();
}

}  // namespace tkv::eval
