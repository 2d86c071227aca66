// The draft-model drafter: a smaller model with the target's tokenizer guesses
// the next tokens greedily (a one-hot proposal, as the acceptance rule in
// sampling::Sampler::verify expects). One DraftModel per engine holds the
// draft's weights and its own paged KV cache (any scheme); each speculative
// sequence gets a DraftModelDrafter with its own draft KV sequence, which it
// keeps in step with the target's tokens: before each proposal it trims its
// KV to the longest common prefix with them (rejected drafts go) and
// prefills the rest, then decodes k tokens one at a time. All of it runs on
// the engine thread, between the target's steps.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/thread_pool.h"
#include "kvcache/kv_cache.h"
#include "model/batch.h"
#include "model/model.h"
#include "runtime/spec/drafter.h"
#include "tokenizer/tokenizer.h"

namespace tkv::runtime::spec {

class DraftModel {
 public:
  // Loads path and refuses a draft whose vocabulary differs from the target's
  // (size, any token's text, bos/eos) with a message naming the first
  // difference. The draft cache: `scheme` (auto_bits > 0: the auto pick for the draft's
  // architecture), room for max_seqs sequences of `context` tokens each.
  static Result<std::unique_ptr<DraftModel>> load(const std::string& path,
                                                  const tok::Tokenizer& target_tok,
                                                  const quant::KvScheme& scheme, double auto_bits,
                                                  int64_t context, int max_seqs, ThreadPool* pool);
  const model::Model& model() const { return *model_; }
  kv::KvCache& cache() { return *cache_; }
  int64_t context() const { return context_; }
  // Runs tokens[0, n) of seq (appended to its KV) in chunks; the last token's
  // logits in *logits when asked.
  Status forward(int seq, const int32_t* tokens, int64_t n, std::vector<float>* logits);

 private:
  std::unique_ptr<model::Model> model_;
  std::unique_ptr<kv::KvCache> cache_;
  int64_t context_ = 0;
  ThreadPool* pool_ = nullptr;
  model::Workspace ws_;
  model::Batch batch_;
};

// A draft token whose probability under the draft model is below this ends the draft
// there (llama.cpp's --spec-draft-p-min has the same role).
inline constexpr double kMinDraftProb = 0.6;

class DraftModelDrafter final : public Drafter {
 public:
  explicit DraftModelDrafter(DraftModel* dm, double min_prob = kMinDraftProb)
      : dm_(dm), min_prob_(min_prob) {}
  ~DraftModelDrafter() override;
  std::vector<int32_t> propose(const std::vector<int32_t>& tokens, int max_k) override;
  int kv_seq() const { return seq_; }  // the draft cache's sequence (-1 before the first call)

 private:
  DraftModel* dm_;
  double min_prob_;
  int seq_ = -1;
  std::vector<int32_t> held_;  // the tokens whose KV seq_ holds
  std::vector<float> logits_;
};

}  // namespace tkv::runtime::spec
