// Engine: a loaded model, its tokenizer and one KV cache; runs prefill (in
// chunks of `ubatch` tokens) and token-by-token decode for a sequence, with
// timing. Superseded by EngineLoop and the public API (turbokv::Engine): only
// `turbokv bench` (until its rewrite) and tests that compare against the
// single-sequence path still use it.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/thread_pool.h"
#include "kvcache/kv_cache.h"
#include "model/model.h"
#include "ops/attention.h"
#include "sampling/sampler.h"
#include "tokenizer/tokenizer.h"

namespace tkv::runtime {

struct EngineOptions {
  std::string model_path;
  kv::CacheOptions cache;  // scheme, page size, capacity
  int n_threads = 0;       // 0 = all cores
  int ubatch = 512;        // prefill chunk
  bool key_center = true;  // --kv-key-center: store k - b_k (model.h); exact for attention
  ops::AttnMode attn = ops::AttnMode::kFused;  // --kv-attn
  // --kv-budget: most bytes the KV pools may take; 0 = half of MemAvailable minus the model file.
  size_t kv_budget_bytes = 0;
};

// Why generate() stopped: n_predict tokens, an end-of-generation token, the
// caller's callback returned false, or the sequence reached the context limit.
enum class FinishReason { kLength, kEog, kStopped, kContextFull };
const char* finish_reason_name(FinishReason r);  // "length" | "eog" | "stop" | "context full"

struct GenerateStats {
  FinishReason finish = FinishReason::kLength;
  int64_t prompt_tokens = 0;
  double prefill_ms = 0;
  int64_t gen_tokens = 0;    // tokens sampled
  int64_t decode_steps = 0;  // forward passes after the prompt
  double decode_ms = 0;
  double prefill_tok_s() const { return prefill_ms > 0 ? prompt_tokens * 1000.0 / prefill_ms : 0; }
  double decode_tok_s() const { return decode_ms > 0 ? decode_steps * 1000.0 / decode_ms : 0; }
};

class Engine {
 public:
  static Result<std::unique_ptr<Engine>> create(const EngineOptions& opts);

  model::Model& model() { return *model_; }
  const tok::Tokenizer& tokenizer() const { return *tok_; }
  kv::KvCache& cache() { return *cache_; }
  ThreadPool& pool() { return *pool_; }
  // Wall time inside the KV cache's attention since the last reset (bench).
  double attention_ms() const { return ws_.attention_ms; }
  void reset_attention_ms() { ws_.attention_ms = 0; }

  // Feeds tokens to seq; logits of the last token (or all, [n, n_vocab]) into *logits.
  // progress(done, total) is called after each chunk.
  Status prefill(int seq, const std::vector<int32_t>& tokens, std::vector<float>* logits,
                 bool all_logits = false,
                 const std::function<void(int64_t, int64_t)>& progress = {});
  // One decode step: feeds `token`, returns the next-token logits.
  Status decode(int seq, int32_t token, std::vector<float>* logits);

  // Tokens one sequence may hold: the context asked for (cache.max_tokens), exactly,
  // although the pool rounds up to whole pages.
  int64_t context_limit() const { return opts_.cache.max_tokens; }

  // Prompt → streamed tokens. on_piece returns false to stop early. A prompt that
  // does not fit the context fails before any prefill; reaching the context limit
  // while decoding is a normal finish (FinishReason::kContextFull).
  Result<GenerateStats> generate(int seq, const std::vector<int32_t>& prompt, int n_predict,
                                 const sampling::SamplerParams& sp,
                                 const std::function<bool(int32_t, const std::string&)>& on_piece,
                                 const std::function<void(int64_t, int64_t)>& progress = {});

 private:
  Engine() = default;
  EngineOptions opts_;
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<model::Model> model_;
  std::unique_ptr<tok::Tokenizer> tok_;
  std::unique_ptr<kv::KvCache> cache_;
  model::Batch batch_;
  model::Workspace ws_;
};

}  // namespace tkv::runtime
