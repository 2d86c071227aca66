// Token streams of the two protocols (protocols.h). wikitext mirrors llama.cpp
// tools/perplexity (chunk i = tokens [i*n_ctx, (i+1)*n_ctx), BOS written over the
// first token when the vocab adds one, positions n_ctx/2 .. n_ctx-2 scored);
// serving-kl takes n_prompts windows spread evenly over the corpus.
#include "eval/protocols.h"

#include <algorithm>

namespace tkv::eval {
namespace {
// Second-half logits are produced this many positions at a time (bounds memory:
// 128 x 262144 vocab x 4 B = 128 MiB for Gemma 3).
constexpr int64_t kLogitPiece = 128;

int64_t serving_window(const EvalOptions& o) {
  return int64_t{o.prefix_tokens} + o.decode_steps + 1;
}

// Frees the sequence when it goes out of scope.
struct SeqGuard {
  kv::KvCache& cache;
  int seq;
  ~SeqGuard() { cache.free_seq(seq); }
};
}  // namespace

std::vector<int32_t> corpus_tokens(const tok::Tokenizer& tok, const std::string& text) {
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

Status run_wikitext(runtime::Engine& eng, const std::vector<int32_t>& corpus, const EvalOptions& o,
                    const PositionFn& on_pos, const WorkFn& on_work) {
  const auto& tok = eng.tokenizer();
  const int64_t nv = eng.model().config().n_vocab;
  const int64_t n_chunks =
      std::min<int64_t>(o.n_chunks, static_cast<int64_t>(corpus.size()) / o.n_ctx);
  const int64_t first = o.n_ctx / 2, work = n_chunks * (o.n_ctx - 1);
  std::vector<float> logits;
  for (int64_t c = 0; c < n_chunks; ++c) {
    std::vector<int32_t> chunk(corpus.begin() + c * o.n_ctx, corpus.begin() + (c + 1) * o.n_ctx);
    if (tok.add_bos() && tok.bos_id() >= 0) chunk[0] = tok.bos_id();
    TKV_ASSIGN_OR_RETURN(const int seq, eng.cache().create_seq());
    SeqGuard guard{eng.cache(), seq};
    TKV_RETURN_IF_ERROR(eng.prefill(seq, {chunk.begin(), chunk.begin() + first}, &logits, false));
    // Positions first .. n_ctx-2 predict tokens first+1 .. n_ctx-1.
    for (int64_t p = first; p < o.n_ctx - 1; p += kLogitPiece) {
      const int64_t m = std::min<int64_t>(kLogitPiece, o.n_ctx - 1 - p);
      TKV_RETURN_IF_ERROR(
          eng.prefill(seq, {chunk.begin() + p, chunk.begin() + p + m}, &logits, true));
      for (int64_t j = 0; j < m; ++j)
        TKV_RETURN_IF_ERROR(on_pos(logits.data() + j * nv, chunk[p + j + 1]));
      if (on_work) on_work(c * (o.n_ctx - 1) + p + m, work);
    }
  }
  return Status();
}

Status run_serving_kl(runtime::Engine& eng, const std::vector<int32_t>& corpus,
                      const EvalOptions& o, const PositionFn& on_pos, const WorkFn& on_work) {
  const auto& tok = eng.tokenizer();
  const int64_t win = serving_window(o), n = static_cast<int64_t>(corpus.size());
  const int64_t work = planned_work(o), per_prompt = o.prefix_tokens + o.decode_steps;
  std::vector<float> logits;
  for (int i = 0; i < o.n_prompts; ++i) {
    const int64_t off = (n - win) * i / o.n_prompts;
    std::vector<int32_t> prompt(corpus.begin() + off, corpus.begin() + off + win);
    if (tok.add_bos() && tok.bos_id() >= 0) prompt[0] = tok.bos_id();
    TKV_ASSIGN_OR_RETURN(const int seq, eng.cache().create_seq());
    SeqGuard guard{eng.cache(), seq};
    TKV_RETURN_IF_ERROR(
        eng.prefill(seq, {prompt.begin(), prompt.begin() + o.prefix_tokens}, &logits, false));
    // The serving decode path, teacher-forced: feed token prefix+s, score the prediction of
    // prefix+s+1.
    for (int s = 0; s < o.decode_steps; ++s) {
      const int64_t at = o.prefix_tokens + s;
      TKV_RETURN_IF_ERROR(eng.decode(seq, prompt[at], &logits));
      TKV_RETURN_IF_ERROR(on_pos(logits.data(), prompt[at + 1]));
      if (on_work) on_work(i * per_prompt + o.prefix_tokens + s + 1, work);
    }
  }
  return Status();
}

}  // namespace tkv::eval
