// EngineLoop: construction, the request entry points and the thread's loop
// (see engine_loop.h); the step itself is in engine_step.cc.
#include "runtime/engine_loop.h"

#include <pthread.h>

#include <csignal>
#include <filesystem>

#include "base/timer.h"
#include "runtime/kv_auto.h"
#include "runtime/kv_sizing.h"
#include "runtime/model_identity.h"

namespace tkv::runtime {
namespace {
// Threads started in its scope block every signal: a signal meant for the
// application (Ctrl-C in `turbokv chat`) then reaches one of its own threads and
// interrupts that thread's blocking read, never lands on an engine thread.
class BlockSignals {
 public:
  BlockSignals() {
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old_);
  }
  ~BlockSignals() { pthread_sigmask(SIG_SETMASK, &old_, nullptr); }

 private:
  sigset_t old_;
};
}  // namespace

Result<std::unique_ptr<EngineLoop>> EngineLoop::create(const LoopOptions& o) {
  if (!std::filesystem::exists(o.model_path))
    return make_error(StatusCode::kNotFound,
                      "[engine] model file not found: {} (run scripts/fetch-models)", o.model_path);
  std::unique_ptr<EngineLoop> e(new EngineLoop());
  e->opts_ = o;
  if (o.backend == ops::Backend::kCuda) {
    if (!ops::backend_available(ops::Backend::kCuda))  // before loading anything
      return make_error(StatusCode::kUnimplemented, "[engine] --device cuda: {}",
                        ops::kCudaBuilt ? "no CUDA device is visible"
                                        : "this turbokv was built without CUDA (configure "
                                          "with -DTKV_CUDA=ON, e.g. scripts/build cuda-release)");
    if (!o.prompt_cache_dir.empty())  // its blocks are copies of host pages
      return invalid_argument("[engine] --device cuda does not take --prompt-cache yet");
  }
  TKV_ASSIGN_OR_RETURN(e->model_, model::Model::load(o.model_path));
  e->model_->set_key_centering(o.key_center);
  e->model_->set_attn_mode(o.attn);
  const std::string& mname = e->model_->config().name;
  const std::string name = mname.empty() ? o.model_path : mname + " (" + o.model_path + ")";
  kv::CacheOptions base = o.cache;
  TKV_ASSIGN_OR_RETURN(
      base.scheme,
      resolve_kv_scheme(base.scheme, o.kv_auto_bits, e->model_->config().arch,
                        e->model_->config().head_dim, name, o.backend == ops::Backend::kCuda));
  base.scheme.head_dim = e->model_->config().head_dim;
  e->opts_.cache.scheme = base.scheme;
  base.budget_bytes = o.kv_budget_bytes;
  // Within one process the file's path and size name the model well enough; the
  // disk prompt cache outlives the process, so its keys hash the model's content.
  if (!o.prompt_cache_dir.empty()) {
    TKV_ASSIGN_OR_RETURN(const uint64_t id, model_identity(e->model_->gguf()));
    e->model_id_ = id;  // the snapshot header reuses it
    e->kv_namespace_ = kv::make_prefix_namespace(fmt::format("{:016x}", id), base, o.key_center);
  } else if (e->opts_.prefix_cache) {
    e->kv_namespace_ = kv::make_prefix_namespace(
        o.model_path + "#" + std::to_string(e->model_->gguf().file_size()), base, o.key_center);
  }
  if (e->opts_.prefix_cache) base.prefix_namespace = e->kv_namespace_;
  TKV_ASSIGN_OR_RETURN(
      KvSizing sz, size_kv_pool(e->model_->kv_shape(), base, o.context, o.max_seqs, o.step_tokens,
                                name, e->model_->gguf().file_size()));
  TKV_ASSIGN_OR_RETURN(e->cache_, kv::create_cache(e->model_->kv_shape(), sz.cache));
  TKV_RETURN_IF_ERROR(e->model_->set_backend(o.backend, *e->cache_));
  e->pool_tokens_ = sz.cache.max_tokens;
  TKV_ASSIGN_OR_RETURN(e->kv_mem_, kv::kv_memory_model(e->model_->kv_shape(), sz.cache));
  TKV_ASSIGN_OR_RETURN(e->tok_, tok::Tokenizer::from_gguf(e->model_->gguf()));
  if (!o.prompt_cache_dir.empty()) TKV_RETURN_IF_ERROR(e->open_prompt_cache());
  SchedulerConfig sc;
  sc.total_pages = sz.total_pages;
  sc.page_size = sz.cache.page_size;
  sc.max_running = o.max_seqs;
  sc.step_tokens = o.step_tokens;
  sc.max_seq_tokens = o.context;
  e->sched_ = std::make_unique<Scheduler>(sc);
  if (o.on_prefix_events) e->cache_->record_prefix_events(true);
  const int hw = static_cast<int>(std::thread::hardware_concurrency());
  e->publish_stats();
  BlockSignals block;
  e->pool_ = std::make_unique<ThreadPool>(o.n_threads > 0 ? o.n_threads : std::max(hw, 1));
  if (!o.draft_model_path.empty()) {
    TKV_ASSIGN_OR_RETURN(
        e->draft_, spec::DraftModel::load(o.draft_model_path, *e->tok_, o.cache.scheme,
                                          o.kv_auto_bits, o.context, o.max_seqs, e->pool_.get()));
  }
  e->thread_ = std::thread([p = e.get()] { p->run(); });
  return e;
}

EngineLoop::~EngineLoop() {
  {
    std::lock_guard<std::mutex> lk(mb_->mu);
    stopping_ = true;
  }
  mb_->poke();
  if (thread_.joinable()) thread_.join();
}

Result<std::shared_ptr<RequestState>> EngineLoop::submit(SeqRequest r) {
  const int64_t n = static_cast<int64_t>(r.prompt.size());
  if (n == 0) return invalid_argument("[engine] empty prompt (a request needs at least 1 token)");
  if (n > opts_.context)
    return invalid_argument(
        "[engine] prompt of {} tokens does not fit the context of {} tokens (raise the context "
        "or shorten the prompt)",
        n, opts_.context);
  const int32_t nv = model_->config().n_vocab;
  for (int32_t t : r.prompt)
    if (t < 0 || t >= nv)
      return invalid_argument("[engine] prompt token id {} out of range (valid: 0 to {})", t,
                              nv - 1);
  TKV_RETURN_IF_ERROR(sampling::validate(r.sampling));
  TKV_RETURN_IF_ERROR(spec::validate(r.spec));
  if (r.spec.kind == spec::Kind::kDraft && !draft_)
    return invalid_argument(
        "[spec] a draft-model request needs an engine started with a draft model "
        "(--draft-model)");
  if (r.logprobs > kMaxLogprobs)
    return invalid_argument("[engine] logprobs {} out of range (valid: < 0 off, 0 to {})",
                            r.logprobs, kMaxLogprobs);
  if (r.on_logits && (r.logits_from < 0 || r.logits_from >= n))
    return invalid_argument("[engine] score: logits_from {} out of range (valid: 0 to {})",
                            r.logits_from, n - 1);
  if (r.on_logits && r.tokens_per_step < 0)
    return invalid_argument("[engine] score: tokens_per_step {} out of range (valid: >= 0)",
                            r.tokens_per_step);
  TKV_RETURN_IF_ERROR(check_session(r));
  const bool queue = !r.on_event;
  auto state = std::make_shared<RequestState>(mb_, queue);
  if (r.max_tokens == 0 && !r.on_logits) {  // nothing to generate: done before it starts
    Event e;
    e.finish = Finish::kLength;
    if (!r.save_session.empty())
      e.session_error =
          "[kv-store] " + r.save_session + ": not written: max_tokens 0 computes no KV";
    if (r.on_event) r.on_event(e);
    state->push(std::move(e));
    return state;
  }
  {
    std::lock_guard<std::mutex> lk(mb_->mu);
    if (stopping_) return make_error(StatusCode::kInternal, "[engine] shutting down");
    auto seq = std::make_unique<Sequence>(next_id_++, std::move(r), state, now_ms());
    if (seq->req.spec.kind == spec::Kind::kDraft)
      seq->drafter = std::make_unique<spec::DraftModelDrafter>(draft_.get());
    inbox_.push_back(std::move(seq));
    mb_->poked = true;
  }
  mb_->cv.notify_all();
  return state;
}

Status EngineLoop::score(const std::vector<int32_t>& tokens, const LogitsFn& on_logits,
                         int64_t logits_from, int64_t tokens_per_step, int priority) {
  SeqRequest r;
  r.prompt = tokens;
  r.priority = priority;
  r.on_logits = on_logits;
  r.logits_from = logits_from;
  r.tokens_per_step = tokens_per_step;
  r.max_tokens = 0;
  TKV_ASSIGN_OR_RETURN(auto st, submit(std::move(r)));
  const Event e = st->wait();
  if (e.finish == Finish::kLength) return Status();
  return make_error(StatusCode::kInternal, "[engine] scoring {} tokens ended: {}{}{}",
                    tokens.size(), finish_name(e.finish), e.error.empty() ? "" : ": ", e.error);
}

LoopStats EngineLoop::stats() const {
  std::lock_guard<std::mutex> lk(stats_mu_);
  return stats_;
}

void EngineLoop::publish_stats() {
  LoopStats s;
  s.running = sched_->n_running();
  s.waiting = sched_->n_waiting();
  s.kv_pages_total = sched_->config().total_pages;
  s.kv_pages_used = sched_->used_pages();
  s.page_size = sched_->config().page_size;
  s.preemptions = sched_->n_preemptions();
  const kv::PrefixStats ps = cache_->prefix_stats();
  s.prefix_cached_pages = ps.cached_pages;
  s.prefix_evictions = ps.evictions;
  if (prompt_dir_) s.prompt_cache = prompt_dir_->stats();
  std::lock_guard<std::mutex> lk(stats_mu_);
  s.steps = stats_.steps;
  s.attention_ms = stats_.attention_ms;
  s.prefix_hits = stats_.prefix_hits;
  s.prefix_tokens_reused = stats_.prefix_tokens_reused;
  s.spec_drafted = stats_.spec_drafted;
  s.spec_accepted = stats_.spec_accepted;
  stats_ = s;
}

// Moves submitted requests to the scheduler; with `wait`, first sleeps until
// something arrives or a handle pokes (cancellation).
bool EngineLoop::take_inbox(bool wait) {
  std::vector<std::unique_ptr<Sequence>> fresh;
  {
    std::unique_lock<std::mutex> lk(mb_->mu);
    if (wait) mb_->cv.wait(lk, [&] { return mb_->poked || stopping_; });
    mb_->poked = false;
    if (stopping_) return false;
    fresh.swap(inbox_);
  }
  for (auto& s : fresh) {
    const ChunkRule rule =
        s->scoring() ? ChunkRule{s->req.logits_from, s->req.tokens_per_step} : ChunkRule{};
    sched_->add(s->id, s->req.priority, static_cast<int64_t>(s->tokens.size()), rule);
    const SeqId id = s->id;
    seqs_.emplace(id, std::move(s));
  }
  return true;
}

void EngineLoop::run() {
  bool idle = true;
  while (take_inbox(idle)) {
    for (auto& [id, s] : seqs_)
      if (s->state->cancelled()) sched_->cancel(id);
    idle = !step();
    flush_prefix_events();
    publish_stats();
  }
  // Shutting down: everything still open (queued, waiting or running) is cancelled.
  {
    std::lock_guard<std::mutex> lk(mb_->mu);
    for (auto& s : inbox_) seqs_.emplace(s->id, std::move(s));
    inbox_.clear();
  }
  std::vector<SeqId> open;
  for (auto& [id, s] : seqs_) open.push_back(id);
  for (SeqId id : open) finish(id, Finish::kCancelled);
  flush_prefix_events();
}

void EngineLoop::flush_prefix_events() {
  if (!opts_.on_prefix_events) return;
  prefix_events_.clear();
  cache_->take_prefix_events(&prefix_events_);
  if (!prefix_events_.empty()) opts_.on_prefix_events(std::move(prefix_events_));
}

}  // namespace tkv::runtime
