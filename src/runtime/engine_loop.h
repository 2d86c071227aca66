// EngineLoop: the batched runtime. It owns the model, tokenizer, KV cache and
// its sequences, and runs a loop on its own thread: each step the Scheduler
// plans one ragged batch (decode tokens + prefill chunks), Model::forward runs
// it, and every sequence that got logits samples, checks its ends (eos, stop
// token, stop string, max tokens, context) and streams an event to its handle.
// submit() and stats() may be called from any thread.
#pragma once
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "base/thread_pool.h"
#include "kvcache/kv_cache.h"
#include "kvcache/prompt_dir.h"
#include "model/batch.h"
#include "model/model.h"
#include "ops/attention.h"
#include "runtime/kv_sizing.h"
#include "runtime/request_state.h"
#include "runtime/scheduler.h"
#include "runtime/sequence.h"
#include "runtime/spec/draft_model.h"
#include "tokenizer/tokenizer.h"

namespace tkv::runtime {

struct LoopOptions {
  std::string model_path;
  kv::CacheOptions cache;  // scheme, page_size, quant_start, swa_bf16
  // --kv-quant auto[:BITS]: > 0 picks cache.scheme at load (runtime/kv_auto.h) within
  // this many stored bits per element; 0 = cache.scheme as given.
  double kv_auto_bits = 0;
  ops::AttnMode attn = ops::AttnMode::kFused;  // --kv-attn
  int64_t context = 4096;                      // most tokens one sequence holds (prompt + output)
  int max_seqs = 8;                            // sequences running at once
  int n_threads = 0;                           // 0 = all cores
  size_t kv_budget_bytes = 0;                  // 0 = half of available memory minus the model
  int64_t step_tokens = 512;                   // most tokens per forward step (>= max_seqs)
  bool prefix_cache = true;                    // reuse cached prompt prefixes (EngineLoop::admit)
  bool key_center = true;                      // store k - b_k (model.h)
  // Disk prompt cache (engine_prompt_cache.cc): off when the directory is empty.
  std::string prompt_cache_dir;
  int64_t prompt_cache_bytes = int64_t{4} << 30;
  // Speculative decoding with a draft model (requests with spec::Kind::kDraft):
  // a GGUF with the target's tokenizer; its cache uses cache.scheme (or its own auto
  // pick). Empty = none.
  std::string draft_model_path;
  // Prefix-index changes (serve --kv-events): called on the engine thread after
  // each step that changed the index, with that step's events in order. Must
  // return quickly (queue them, never do I/O). Empty = not recorded.
  std::function<void(std::vector<kv::PrefixEvent>&&)> on_prefix_events;
  // --device: where the forward runs. kCuda turns prefix sharing off (its
  // copy-on-write copies host pages) and refuses session files.
  ops::Backend backend = ops::Backend::kCpu;
};

struct LoopStats {
  int running = 0, waiting = 0;
  int64_t kv_pages_total = 0, kv_pages_used = 0;
  int page_size = 0;
  int64_t steps = 0, preemptions = 0;
  int64_t prefix_hits = 0, prefix_tokens_reused = 0;
  int64_t prefix_cached_pages = 0, prefix_evictions = 0;  // the index now / evicted so far
  double attention_ms = 0;  // wall time inside KV attention since the engine started
  int64_t spec_drafted = 0, spec_accepted = 0;  // speculative draft tokens verified / kept
  kv::PromptDirStats prompt_cache;              // zeros without --prompt-cache
};

class EngineLoop {
 public:
  static Result<std::unique_ptr<EngineLoop>> create(const LoopOptions& o);
  // Stops the loop; requests still open finish as cancelled.
  ~EngineLoop();
  EngineLoop(const EngineLoop&) = delete;
  EngineLoop& operator=(const EngineLoop&) = delete;

  // Queues a request; invalid ones (empty or too long prompt, token ids out of
  // the vocabulary, bad sampling values) are refused here, not mid-run.
  Result<std::shared_ptr<RequestState>> submit(SeqRequest r);
  // Teacher-forced logits of tokens (<= the context), chunk by chunk, on the
  // engine thread, from position logits_from on, at most tokens_per_step tokens
  // a step there (SeqRequest); blocks until done.
  Status score(const std::vector<int32_t>& tokens, const LogitsFn& on_logits,
               int64_t logits_from = 0, int64_t tokens_per_step = 0, int priority = 0);

  LoopStats stats() const;
  // The snapshot header this engine writes and accepts (no tokens): the cache's
  // layout, the model identity (hashed on first use) and key centering.
  Result<kv::SnapshotHeader> snapshot_header() const;
  const model::Model& model() const { return *model_; }
  const tok::Tokenizer& tokenizer() const { return *tok_; }
  const kv::KvCache& cache() const { return *cache_; }
  // The --kv-quant scheme the cache was built with, at the model's head_dim (auto: the pick).
  const quant::KvScheme& kv_scheme() const { return opts_.cache.scheme; }
  int64_t context() const { return opts_.context; }
  int64_t pool_tokens() const { return pool_tokens_; }
  // Bytes n tokens of one sequence take in this cache (kv_sizing.h).
  size_t kv_bytes_for_tokens(int64_t n) const { return runtime::kv_bytes_for_tokens(kv_mem_, n); }
  const kv::KvMemoryModel& kv_memory() const { return kv_mem_; }
  int n_threads() const { return pool_->n_threads(); }

 private:
  EngineLoop() = default;
  void run();
  bool take_inbox(bool wait);  // false once stopping
  bool step();                 // false when nothing ran
  void run_chunks(const StepPlan& p);
  // logits: the row tok was sampled from (for Event::logprob when asked).
  // False when s finished (it is gone then).
  bool on_token(Sequence& s, int32_t tok, const float* logits);
  // Speculation (engine_spec.cc): offer s's next drafts to the scheduler; decide
  // a verify chunk's rows [1 + c.n_draft, n_vocab], roll back what was rejected
  // and stream what was kept.
  void propose(Sequence& s);
  void verify(Sequence& s, const PlannedChunk& c, const float* logits);
  void emit(Sequence& s, Event e);
  void finish(SeqId id, Finish why, const std::string& error = {});
  int64_t admit(SeqId id);
  void publish(const Sequence& s);
  void publish_stats();
  void flush_prefix_events();                            // to opts_.on_prefix_events
  Status check_session(SeqRequest& r) const;             // engine_session.cc
  int64_t load_session(Sequence& s);                     // at admission: tokens loaded
  void save_session(const Sequence& s, Event* e) const;  // at finish, before free_seq
  Status open_prompt_cache();                            // engine_prompt_cache.cc
  int64_t load_prompt_cache(Sequence& s);                // at admission: tokens loaded
  void store_prompt_cache(const Sequence& s);            // at finish, before free_seq

  LoopOptions opts_;
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<model::Model> model_;
  std::unique_ptr<tok::Tokenizer> tok_;
  std::unique_ptr<kv::KvCache> cache_;
  uint64_t kv_namespace_ = 0;         // prefix keys: of the cache, and of prompt_dir_
  std::optional<uint64_t> model_id_;  // model_identity when create hashed it (--prompt-cache)
  std::unique_ptr<kv::PromptDir> prompt_dir_;
  std::unique_ptr<spec::DraftModel> draft_;  // --draft-model; engine thread only after create  //
                                             // --prompt-cache; written by its own thread
  std::unique_ptr<Scheduler> sched_;
  int64_t pool_tokens_ = 0;
  kv::KvMemoryModel kv_mem_;
  model::Batch batch_;
  model::Workspace ws_;
  std::vector<kv::PrefixEvent> prefix_events_;  // engine thread only

  std::shared_ptr<Mailbox> mb_ = std::make_shared<Mailbox>();
  std::vector<std::unique_ptr<Sequence>> inbox_;               // guarded by mb_->mu
  bool stopping_ = false;                                      // guarded by mb_->mu
  SeqId next_id_ = 0;                                          // guarded by mb_->mu
  std::unordered_map<SeqId, std::unique_ptr<Sequence>> seqs_;  // engine thread only
  mutable std::mutex stats_mu_;
  LoopStats stats_;
  mutable std::mutex snap_mu_;
  mutable std::optional<Result<kv::SnapshotHeader>> snap_header_;  // guarded by snap_mu_
  std::thread thread_;
};

}  // namespace tkv::runtime
