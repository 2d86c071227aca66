// The draft-model drafter (see draft_model.h).
#include "runtime/spec/draft_model.h"

#include <algorithm>
#include <cmath>

#include "runtime/kv_auto.h"

namespace tkv::runtime::spec {
namespace {

constexpr int64_t kChunk = 512;  // prefill chunk of the draft

Status check_vocab(const tok::Tokenizer& draft, const tok::Tokenizer& target,
                   const std::string& path) {
  if (draft.n_vocab() != target.n_vocab())
    return invalid_argument(
        "[spec] draft model {} has a vocabulary of {} tokens, the target {}: a draft must use the "
        "target's tokenizer",
        path, draft.n_vocab(), target.n_vocab());
  if (draft.bos_id() != target.bos_id() || draft.eos_id() != target.eos_id())
    return invalid_argument(
        "[spec] draft model {}: bos/eos ids {}/{} differ from the target's {}/{}", path,
        draft.bos_id(), draft.eos_id(), target.bos_id(), target.eos_id());
  for (int32_t id = 0; id < target.n_vocab(); ++id)
    if (draft.token_to_piece(id, true) != target.token_to_piece(id, true))
      return invalid_argument(
          "[spec] draft model {}: token {} is '{}' there and '{}' in the target: a draft must "
          "use the target's tokenizer",
          path, id, draft.token_to_piece(id, true), target.token_to_piece(id, true));
  return Status();
}

}  // namespace

Result<std::unique_ptr<DraftModel>> DraftModel::load(const std::string& path,
                                                     const tok::Tokenizer& target_tok,
                                                     const quant::KvScheme& scheme,
                                                     double auto_bits, int64_t context,
                                                     int max_seqs, ThreadPool* pool) {
  std::unique_ptr<DraftModel> d(new DraftModel());
  auto m = model::Model::load(path);
  if (!m.ok()) return make_error(m.status().code(), "[spec] draft model: {}", m.status().message());
  d->model_ = std::move(m).value();
  TKV_ASSIGN_OR_RETURN(auto tok, tok::Tokenizer::from_gguf(d->model_->gguf()));
  TKV_RETURN_IF_ERROR(check_vocab(*tok, target_tok, path));
  kv::CacheOptions o;
  TKV_ASSIGN_OR_RETURN(o.scheme,
                       resolve_kv_scheme(scheme, auto_bits, d->model_->config().arch,
                                         d->model_->config().head_dim, "the draft model " + path));
  o.max_tokens = context * max_seqs;
  o.max_seqs = max_seqs;
  o.max_chunk_tokens = kChunk;
  auto c = kv::create_cache(d->model_->kv_shape(), o);
  if (!c.ok())
    return make_error(c.status().code(), "[spec] draft model's KV cache: {}", c.status().message());
  d->cache_ = std::move(c).value();
  d->context_ = context;
  d->pool_ = pool;
  return d;
}

Status DraftModel::forward(int seq, const int32_t* tokens, int64_t n, std::vector<float>* logits) {
  const int64_t nv = model_->config().n_vocab;
  for (int64_t at = 0; at < n; at += kChunk) {
    const int64_t len = std::min(kChunk, n - at);
    const bool last = at + len == n;
    batch_.clear();
    batch_.add(seq, tokens + at, len,
               last && logits ? model::LogitsWanted::kLast : model::LogitsWanted::kNone);
    TKV_RETURN_IF_ERROR(model_->forward(batch_, ws_, *cache_, *pool_));
    if (last && logits) logits->assign(ws_.slice_logits(0, nv), ws_.slice_logits(0, nv) + nv);
  }
  return Status();
}

DraftModelDrafter::~DraftModelDrafter() {
  if (seq_ >= 0) dm_->cache().free_seq(seq_);
}

std::vector<int32_t> DraftModelDrafter::propose(const std::vector<int32_t>& tokens, int max_k) {
  const auto n = static_cast<int64_t>(tokens.size());
  max_k = static_cast<int>(std::min<int64_t>(max_k, dm_->context() - n));
  if (max_k <= 0 || n == 0) return {};
  kv::KvCache& cache = dm_->cache();
  if (seq_ < 0) {
    auto s = cache.create_seq();
    if (!s.ok()) return {};  // every draft sequence in use: no guess this time
    seq_ = s.value();
  }
  // Keep the longest common prefix, but recompute at least the last token (its logits).
  int64_t keep =
      std::mismatch(held_.begin(), held_.end(), tokens.begin(), tokens.end()).first - held_.begin();
  keep = std::min(keep, n - 1);
  cache.trim_seq(seq_, keep);
  held_.assign(tokens.begin(), tokens.begin() + keep);
  std::vector<int32_t> out;
  if (!dm_->forward(seq_, tokens.data() + keep, n - keep, &logits_).ok()) {
    cache.trim_seq(seq_, 0);  // an error (no room): start over next time
    held_.clear();
    return {};
  }
  held_ = tokens;
  for (int i = 0; i < max_k; ++i) {
    const auto top = std::max_element(logits_.begin(), logits_.end());
    const auto best = static_cast<int32_t>(top - logits_.begin());
    // The draft's own probability of its guess: below min_prob_ the guess is more likely
    // rejected than kept, and on a CPU every drafted token costs target compute.
    // Summed only until it shows the guess below the floor (p = 1 / z).
    const double z_max = min_prob_ > 0 ? 1.0 / min_prob_ : INFINITY;
    double z = 0;
    for (const float l : logits_)
      if ((z += std::exp(static_cast<double>(l - *top))) > z_max) break;
    if (z > z_max) break;
    out.push_back(best);
    if (i + 1 == max_k) break;
    if (!dm_->forward(seq_, &best, 1, &logits_).ok()) break;
    held_.push_back(best);
  }
  return out;
}

}  // namespace tkv::runtime::spec
