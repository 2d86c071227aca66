// Engine (include/turbokv/engine.h): the public facade over runtime::EngineLoop.
// It resolves chat messages into tokens, maps types (convert.h) and keeps the
// model description; the loop does the work.
#include "turbokv/engine.h"

#include "api/convert.h"
#include "api/handle.h"
#include "quant/kv_scheme.h"

namespace turbokv {

struct Engine::Impl {
  EngineConfig cfg;
  std::unique_ptr<tkv::runtime::EngineLoop> loop;
  ModelInfo info;
  double format_bits = 16;  // KvInfo::format_bits_per_elem
  Tokenizer::Impl tok_impl;
  Tokenizer tok{&tok_impl};
};

Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Engine::~Engine() = default;

Result<std::unique_ptr<Engine>> Engine::create(const EngineConfig& cfg) {
  auto impl = std::make_unique<Impl>();
  impl->cfg = cfg;
  TKV_ASSIGN_OR_RETURN(impl->loop, tkv::runtime::EngineLoop::create(detail::to_runtime(cfg)));
  const tkv::model::Model& m = impl->loop->model();
  const tkv::model::ModelConfig& c = m.config();
  ModelInfo& i = impl->info;
  i.arch = c.arch;
  i.name = c.name;
  i.n_layers = c.n_layers;
  i.n_heads = c.n_heads;
  i.n_kv_heads = c.n_kv_heads;
  i.head_dim = c.head_dim;
  i.d_model = c.d_model;
  i.n_vocab = c.n_vocab;
  i.n_ctx_train = c.n_ctx_train;
  i.has_chat_template = !m.gguf().get_string_or("tokenizer.chat_template", "").empty();
  i.weight_bytes_per_token = m.weight_bytes_per_token();
  i.file_bytes = m.gguf().file_size();
  impl->tok_impl.tok = &impl->loop->tokenizer();
  // The scheme was accepted for this head_dim when the cache was built.
  // (--kv-quant auto: the scheme the engine picked)
  const tkv::quant::KvScheme& scheme = impl->loop->kv_scheme();
  // bf16/f16 rows take any head_dim % 8 == 0, which the row-layout helpers do not.
  impl->format_bits = scheme.is_float() ? 16 : tkv::quant::kv_bits_per_element(scheme);
  return std::unique_ptr<Engine>(new Engine(std::move(impl)));
}

Result<RequestHandle> Engine::submit(const Request& r) {
  std::vector<int32_t> prompt = r.prompt_tokens;
  if (prompt.empty() && !r.messages.empty()) {
    // Without a template the tokenizer would guess a format from the vocabulary,
    // one a base model was never trained on: refuse instead.
    if (!impl_->info.has_chat_template)
      return tkv::invalid_argument(
          "[engine] model {} has no chat template (tokenizer.chat_template is absent): it is "
          "likely a base model; send prompt tokens instead of chat messages",
          impl_->info.name);
    TKV_ASSIGN_OR_RETURN(const std::string text, tokenizer().apply_chat_template(r.messages));
    prompt = impl_->tok.encode(text, true, true);
  }
  TKV_ASSIGN_OR_RETURN(auto state, impl_->loop->submit(detail::to_runtime(r, std::move(prompt))));
  return RequestHandle(std::make_shared<RequestHandle::Impl>(RequestHandle::Impl{state}));
}

Result<Completion> Engine::generate(const Request& r) {
  Request q = r;
  Completion out;
  q.on_token = [&out, user = r.on_token](const Event& e) {
    if (e.token >= 0) out.tokens.push_back(e.token);
    out.text += e.text;
    if (e.is_final()) {
      out.finish = e.finish;
      out.error = e.error;
      out.timings = e.timings;
    }
    if (user) user(e);
  };
  TKV_ASSIGN_OR_RETURN(RequestHandle h, submit(q));
  h.wait();  // the callback saw the final event before wait() returns
  return out;
}

Status Engine::score(const std::vector<int32_t>& tokens, const LogitsCallback& on_logits,
                     const ScoreOptions& opts) {
  return impl_->loop->score(tokens, on_logits, opts.logits_from, opts.tokens_per_step);
}

const ModelInfo& Engine::model_info() const {
  return impl_->info;
}

KvInfo Engine::kv_info() const {
  const tkv::kv::KvCache& c = impl_->loop->cache();
  KvInfo k;
  k.scheme = c.scheme_name();
  k.bytes_per_token = c.bytes_per_token();
  k.allocated_bytes = c.allocated_bytes();
  k.window_bytes_per_seq = impl_->loop->kv_memory().window_bytes_per_seq;
  k.format_bits_per_elem = impl_->format_bits;
  k.pool_tokens = impl_->loop->pool_tokens();
  k.context = impl_->loop->context();
  k.page_size = impl_->cfg.page_size;
  const tkv::ops::AttnCheck v = impl_->loop->model().attn_check();
  k.verify_calls = v.calls;
  k.verify_max_abs_err = v.max_abs_err;
  k.verify_max_abs_out = v.max_abs_out;
  k.verify_max_rel_err = v.max_rel_err;
  return k;
}

size_t Engine::kv_bytes_for_tokens(int64_t n) const {
  return impl_->loop->kv_bytes_for_tokens(n);
}

int64_t Engine::kv_max_context(size_t budget_bytes) const {
  return tkv::kv::kv_max_context(impl_->loop->kv_memory(), budget_bytes);
}

const Tokenizer& Engine::tokenizer() const {
  return impl_->tok;
}

const EngineConfig& Engine::config() const {
  return impl_->cfg;
}

EngineStats Engine::stats() const {
  const tkv::runtime::LoopStats s = impl_->loop->stats();
  EngineStats e;
  e.running = s.running;
  e.waiting = s.waiting;
  e.kv_pages_total = s.kv_pages_total;
  e.kv_pages_used = s.kv_pages_used;
  e.kv_pages_free = s.kv_pages_total - s.kv_pages_used;
  e.steps = s.steps;
  e.preemptions = s.preemptions;
  e.prefix_hits = s.prefix_hits;
  e.prefix_tokens_reused = s.prefix_tokens_reused;
  e.prefix_cache_blocks = s.prefix_cached_pages;
  e.prefix_cache_evictions = s.prefix_evictions;
  e.spec_drafted_tokens = s.spec_drafted;
  e.spec_accepted_tokens = s.spec_accepted;
  e.attention_ms = s.attention_ms;
  e.prompt_cache_hits = s.prompt_cache.hits;
  e.prompt_cache_tokens = s.prompt_cache.tokens_loaded;
  e.prompt_cache_writes = s.prompt_cache.writes;
  e.prompt_cache_write_errors = s.prompt_cache.write_errors;
  e.prompt_cache_skipped = s.prompt_cache.skipped;
  e.prompt_cache_evictions = s.prompt_cache.evictions;
  e.prompt_cache_bytes = s.prompt_cache.bytes;
  return e;
}

}  // namespace turbokv
