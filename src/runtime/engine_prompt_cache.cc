// The disk prompt cache in the engine loop (--prompt-cache DIR, kv::PromptDir):
// a third prefix source after session snapshots and the in-memory prefix
// cache. At admission, a run of blocks longer than what the memory holds is
// read, checked and copied into the new sequence (then indexed in memory too);
// at finish, the full pages of a sequence from its first block not on disk on
// are copied out on the engine thread and written by the directory's own
// thread, so a slow disk never stalls a step.
#include "base/log.h"
#include "kvcache/prefix_key.h"
#include "runtime/engine_loop.h"

namespace tkv::runtime {

Status EngineLoop::open_prompt_cache() {
  auto h = snapshot_header();
  if (!h.ok())
    return invalid_argument("[prompt-cache] --prompt-cache cannot be used with this cache: {}",
                            h.status().message());
  TKV_ASSIGN_OR_RETURN(prompt_dir_, kv::PromptDir::open(opts_.prompt_cache_dir, kv_namespace_,
                                                        opts_.prompt_cache_bytes, h.value()));
  const kv::PromptDirStats st = prompt_dir_->stats();
  TKV_LOG_INFO("[prompt-cache] {}: {} entries of this model and scheme, {} MiB in the directory",
               opts_.prompt_cache_dir, st.entries, st.bytes >> 20);
  if (st.skipped > 0)
    TKV_LOG_WARN("[prompt-cache] {}: {} corrupt or foreign entries removed", opts_.prompt_cache_dir,
                 st.skipped);
  return Status();
}

int64_t EngineLoop::load_prompt_cache(Sequence& s) {
  const int ps = opts_.cache.page_size;
  const int64_t n = static_cast<int64_t>(s.tokens.size());
  const int64_t max_blocks = (n - 1) / ps;  // leave the last token to compute
  const int64_t in_memory = opts_.prefix_cache ? cache_->cached_prefix(s.tokens.data(), n) / ps : 0;
  if (max_blocks <= in_memory) return 0;
  std::vector<uint64_t> keys(static_cast<size_t>(max_blocks));
  kv::prefix_block_keys(kv_namespace_, s.tokens.data(), max_blocks, ps, keys.data());
  auto snap = prompt_dir_->lookup(keys.data(), max_blocks, in_memory + 1, s.tokens.data());
  if (!snap) return 0;
  const int64_t loaded = snap->header.n_tokens();
  const Status st = cache_->import_seq(s.kv, *snap, loaded);
  if (!st.ok()) {  // no room now: the in-memory prefix or a prefill instead
    TKV_LOG_WARN("[prompt-cache] {}; not loaded", st.message());
    return 0;
  }
  if (opts_.prefix_cache) cache_->publish_prefix(s.kv, s.tokens.data(), loaded);
  return loaded;
}

void EngineLoop::store_prompt_cache(const Sequence& s) {
  const int ps = opts_.cache.page_size;
  // Only what was streamed: drafts kept past a stop are not part of the sequence.
  const int64_t n = std::min<int64_t>(cache_->seq_len(s.kv), static_cast<int64_t>(s.tokens.size()));
  const int64_t blocks = n / ps;
  if (blocks == 0) return;
  std::vector<uint64_t> keys(static_cast<size_t>(blocks));
  kv::prefix_block_keys(kv_namespace_, s.tokens.data(), blocks, ps, keys.data());
  const int64_t first = prompt_dir_->count_present(keys.data(), blocks);
  if (first == blocks) return;
  std::vector<std::vector<uint8_t>> pages;
  const Status st = cache_->export_seq(s.kv, blocks * ps, &pages);
  if (!st.ok()) {
    TKV_LOG_WARN("[prompt-cache] not written: {}", st.message());
    return;
  }
  prompt_dir_->put({s.tokens.begin(), s.tokens.begin() + blocks * ps}, std::move(keys), first,
                   std::move(pages));
}

}  // namespace tkv::runtime
