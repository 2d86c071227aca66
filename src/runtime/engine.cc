// Engine implementation (see engine.h).
#include "runtime/engine.h"

#include <algorithm>
#include <filesystem>
#include <thread>

#include "base/timer.h"

namespace tkv::runtime {

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::kLength:
      return "length";
    case FinishReason::kEog:
      return "eog";
    case FinishReason::kStopped:
      return "stop";
    case FinishReason::kContextFull:
      return "context full";
  }
  return "?";
}

Result<std::unique_ptr<Engine>> Engine::create(const EngineOptions& opts) {
  if (!std::filesystem::exists(opts.model_path))
    return make_error(StatusCode::kNotFound,
                      "[engine] model file not found: {} (run scripts/fetch-models)",
                      opts.model_path);
  std::unique_ptr<Engine> e(new Engine());
  e->opts_ = opts;
  const int nt =
      opts.n_threads > 0 ? opts.n_threads : static_cast<int>(std::thread::hardware_concurrency());
  e->pool_ = std::make_unique<ThreadPool>(nt > 0 ? nt : 1);
  TKV_ASSIGN_OR_RETURN(e->model_, model::Model::load(opts.model_path));
  e->model_->set_key_centering(opts.key_center);
  e->model_->set_attn_mode(opts.attn);
  TKV_ASSIGN_OR_RETURN(e->tok_, tok::Tokenizer::from_gguf(e->model_->gguf()));
  kv::CacheOptions co = opts.cache;
  co.budget_bytes = opts.kv_budget_bytes > 0 ? opts.kv_budget_bytes
                                             : kv::default_kv_budget(e->model_->gguf().file_size());
  TKV_ASSIGN_OR_RETURN(e->cache_, kv::create_cache(e->model_->kv_shape(), co));
  return e;
}

Status Engine::prefill(int seq, const std::vector<int32_t>& tokens, std::vector<float>* logits,
                       bool all_logits, const std::function<void(int64_t, int64_t)>& progress) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (n == 0) return invalid_argument("[engine] empty prompt");
  const int64_t nv = model_->config().n_vocab;
  logits->resize(static_cast<size_t>((all_logits ? n : 1) * nv));
  for (int64_t i = 0; i < n; i += opts_.ubatch) {
    const int64_t m = std::min<int64_t>(opts_.ubatch, n - i);
    const bool last = i + m == n;
    batch_.clear();
    batch_.add(seq, tokens.data() + i, m,
               all_logits ? model::LogitsWanted::kAll
                          : (last ? model::LogitsWanted::kLast : model::LogitsWanted::kNone));
    TKV_RETURN_IF_ERROR(model_->forward(batch_, ws_, *cache_, *pool_));
    if (all_logits || last)
      std::copy_n(ws_.logits.data(), (all_logits ? m : 1) * nv,
                  all_logits ? logits->data() + i * nv : logits->data());
    if (progress) progress(i + m, n);
  }
  return Status();
}

Status Engine::decode(int seq, int32_t token, std::vector<float>* logits) {
  const int64_t nv = model_->config().n_vocab;
  logits->resize(static_cast<size_t>(nv));
  batch_.clear();
  batch_.add(seq, &token, 1, model::LogitsWanted::kLast);
  TKV_RETURN_IF_ERROR(model_->forward(batch_, ws_, *cache_, *pool_));
  std::copy_n(ws_.logits.data(), nv, logits->data());
  return Status();
}

Result<GenerateStats> Engine::generate(
    int seq, const std::vector<int32_t>& prompt, int n_predict, const sampling::SamplerParams& sp,
    const std::function<bool(int32_t, const std::string&)>& on_piece,
    const std::function<void(int64_t, int64_t)>& progress) {
  GenerateStats st;
  const int64_t used = cache_->seq_len(seq), limit = context_limit();
  if (used + static_cast<int64_t>(prompt.size()) > limit)
    return invalid_argument(
        "[engine] prompt of {} tokens does not fit the context: {} tokens in use, context {} "
        "tokens (-c)",
        prompt.size(), used, limit);
  std::vector<float> logits;
  std::vector<int32_t> history = prompt;
  sampling::Sampler sampler(sp);
  Timer t;
  TKV_RETURN_IF_ERROR(prefill(seq, prompt, &logits, false, progress));
  st.prompt_tokens = static_cast<int64_t>(prompt.size());
  st.prefill_ms = t.elapsed_ms();
  t.reset();
  for (int i = 0; i < n_predict; ++i) {
    const int32_t tok =
        sampler.sample(logits.data(), model_->config().n_vocab, history, prompt.size());
    history.push_back(tok);
    ++st.gen_tokens;
    if (tok_->is_eog(tok)) {
      st.finish = FinishReason::kEog;
      break;
    }
    if (on_piece && !on_piece(tok, tok_->token_to_piece(tok))) {
      st.finish = FinishReason::kStopped;
      break;
    }
    if (i + 1 == n_predict) break;
    if (cache_->seq_len(seq) >= limit) {
      st.finish = FinishReason::kContextFull;
      break;
    }
    TKV_RETURN_IF_ERROR(decode(seq, tok, &logits));
    ++st.decode_steps;
  }
  st.decode_ms = t.elapsed_ms();
  return st;
}

}  // namespace tkv::runtime
