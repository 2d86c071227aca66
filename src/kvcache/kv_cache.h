// The one KV-cache interface every architecture writes to and reads pages from.
// A forward pass over n new tokens of a sequence calls reserve() once, then
// write() + view() per layer (attention itself is ops::attention over the view),
// then commit(). Implementations (bf16, affine,
// TurboQuant) own their page pools; PageTable does the host bookkeeping.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "kernels/attention/kv_page.h"
#include "kvcache/kv_store.h"
#include "kvcache/prefix_event.h"
#include "quant/kv_scheme.h"

namespace tkv::kv {

struct KvShape {
  int n_layers = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  std::vector<int64_t> layer_window;  // [n_layers] 0 = full attention, else sliding window size
};

struct CacheOptions {
  // --kv-quant, parsed (parse_kv_quant); its head_dim is replaced by the model's.
  quant::KvScheme scheme{quant::KvKind::kBf16, 16, 16, 128};
  int page_size = 64;         // tokens per page
  int64_t max_tokens = 4096;  // pool capacity in tokens (all sequences together)
  int max_seqs = 8;
  int64_t quant_start = 0;          // --kv-quant-start: positions < quant_start stay bf16
  bool swa_bf16 = false;            // --kv-quant-swa bf16: sliding-window layers stay bf16
  int64_t max_chunk_tokens = 4096;  // largest n_new of one reserve (sizes sliding-window pools)
  // --kv-budget: the most bytes the pools may take; creation fails past it.
  // 0 = default_kv_budget(0).
  size_t budget_bytes = 0;
  // Prefix sharing (docs/kv-cache.md): seeds the content keys of full pages, so it
  // must change whenever the KV a token gets changes (make_prefix_namespace).
  // 0 = prefix sharing off.
  uint64_t prefix_namespace = 0;
};

// Counters of prefix sharing since the cache was created.
struct PrefixStats {
  int64_t lookups = 0;           // attach_prefix calls that searched the index
  int64_t looked_up_tokens = 0;  // tokens those calls were given
  int64_t hit_tokens = 0;        // tokens they mapped from cached pages
  int64_t cached_pages = 0;      // pages in the index now (referenced or not)
  int64_t evictions = 0;         // cached pages reclaimed by reserve()
};

// Largest values a cache accepts, so every size derived from them fits in int64.
constexpr int64_t kMaxCacheTokens = int64_t{1} << 30;  // max_tokens, windows, chunks
constexpr int kMaxCacheSeqs = 4096;

// The default KV budget: half of MemAvailable (/proc/meminfo) minus
// reserved_bytes (the model's own size), at least 64 MiB; unlimited when
// MemAvailable cannot be read.
size_t default_kv_budget(size_t reserved_bytes);

// The one parser of the --kv-* flag values; errors list the valid forms. The scheme's
// spelling only: head_dim (set to 128 here) is checked when the cache is built for a model.
Result<quant::KvScheme> parse_kv_quant(std::string_view text);
Result<bool> parse_swa_mode(const std::string& text);  // "quant" -> false | "bf16" -> true

// Memory model of a cache: bytes per token over all layers (sliding-window layers
// counted as if they kept every token), and the fixed bytes per sequence of the
// rotating sliding-window pages.
struct KvMemoryModel {
  size_t bytes_per_token = 0;         // all layers, full + sliding as if full
  size_t full_bytes_per_token = 0;    // full-attention layers only (grows with context)
  size_t window_bytes_per_seq = 0;    // sliding-window layers (bounded by the window)
  int64_t prefix_tokens = 0;          // --kv-quant-start: first tokens kept bf16 ...
  size_t prefix_bytes_per_token = 0;  // ... at this cost in the full-attention layers
};
Result<KvMemoryModel> kv_memory_model(const KvShape& shape, const CacheOptions& opts);
// Longest context of one sequence that fits in budget_bytes (0 if none).
int64_t kv_max_context(const KvMemoryModel& m, size_t budget_bytes);

class KvCache {
 public:
  virtual ~KvCache() = default;

  virtual Result<int> create_seq() = 0;
  virtual void free_seq(int seq) = 0;
  virtual Result<int> fork_seq(int src) = 0;
  virtual int64_t seq_len(int seq) const = 0;
  // Drops tokens past n_tokens. A page shared with another sequence or the prefix
  // index stays mapped; the next reserve() copies it before anything is written
  // into it (copy-on-write), so trimming never fails.
  virtual void trim_seq(int seq, int64_t n_tokens) = 0;
  // Called after the host copies a page's bytes (copy-on-write in reserve(), the partial
  // page of fork_seq()) with the store and the two page ids, so that a device holding
  // the bytes (the CUDA forward's pools) copies its own. One hook; an empty one clears it.
  using PageCopyHook = std::function<void(int store, int32_t src, int32_t dst)>;
  virtual void set_page_copy_hook(PageCopyHook hook) = 0;

  // Prefix sharing (all no-ops returning 0 when CacheOptions::prefix_namespace is
  // 0 or the layout does not support it, see docs/kv-cache.md).
  // For an empty seq: maps the longest run of cached full pages whose blocks match
  // tokens[0, n) into seq, sets seq_len to the tokens reused and returns it. At
  // most the largest multiple of page_size below n is reused, so the caller still
  // computes at least one token (and gets its logits).
  virtual int64_t attach_prefix(int seq, const int32_t* tokens, int64_t n) = 0;  // tokens: [n]
  // What attach_prefix would reuse for tokens[0, n), without mapping anything.
  virtual int64_t cached_prefix(const int32_t* tokens, int64_t n) const = 0;  // tokens: [n]
  // After tokens[0, n) of seq are committed: indexes seq's full pages covering
  // them. Idempotent; blocks already in the index are skipped.
  virtual void publish_prefix(int seq, const int32_t* tokens, int64_t n) = 0;  // tokens: [n]
  // Drops every unreferenced cached page back to the free list and empties the index.
  virtual void clear_prefix_cache() = 0;
  virtual PrefixStats prefix_stats() const = 0;
  // From now on (on) or no longer, index changes are recorded as PrefixEvents
  // (prefix_event.h); take_prefix_events appends what was recorded since the
  // last call to out and forgets it. Nothing is recorded while prefix sharing is off.
  virtual void record_prefix_events(bool on) = 0;
  virtual void take_prefix_events(std::vector<PrefixEvent>* out) = 0;
  // Pages (of page_size tokens) the full-attention scheme store can still hand
  // out: free pages plus cached pages no sequence references (evicted on demand).
  virtual int64_t available_pages() const = 0;

  // Allocates room for n_new tokens after seq_len(seq); fails when full.
  virtual Status reserve(int seq, int64_t n_new) = 0;
  // k, v: [n_tokens, n_kv_heads, head_dim] fp32 for positions [pos0, pos0 + n_tokens).
  virtual void write(int layer, int seq, int64_t pos0, int64_t n_tokens, const float* k,
                     const float* v) = 0;
  // The pages of (layer, seq) holding positions [0, n_tokens), written so far
  // (this pass's write() included, before commit). The view stays valid until the
  // next reserve/trim/free of seq; ops::attention reads it.
  virtual kernels::KvView view(int layer, int seq, int64_t n_tokens) const = 0;
  virtual void commit(int seq, int64_t n_new) = 0;

  // The page stores one layer's view() segments come from, in position order (one,
  // or a bf16 prefix and then the scheme under --kv-quant-start), with their page
  // format and pool size: what a device mirror of the pools allocates. Page ids in
  // view() index these pools.
  struct LayerStore {
    kernels::KvPageFormat format;
    int64_t n_pages = 0;  // pages in the pool
    int64_t begin = 0;    // first sequence position the store holds
    int64_t window = 0;   // 0 = full attention, else the sliding window
  };
  virtual std::vector<LayerStore> layer_stores(int layer) const = 0;

  virtual const KvShape& shape() const = 0;
  virtual std::string scheme_name() const = 0;
  // Bytes one token occupies over all layers and kv heads.
  virtual size_t bytes_per_token() const = 0;
  // Bytes actually allocated for pools (measured from the allocations).
  virtual size_t allocated_bytes() const = 0;
  virtual int64_t capacity_tokens() const = 0;
  // Snapshots (kv_store.h). The header fields this cache's bytes depend on
  // (model_id and key_center are the caller's; no tokens), or an error for a
  // layout snapshots do not support yet (sliding-window layers).
  virtual Result<SnapshotHeader> snapshot_header() const = 0;
  // The pages of seq's first n_tokens (<= seq_len) in file order, as stored.
  virtual Status export_seq(int seq, int64_t n_tokens,
                            std::vector<std::vector<uint8_t>>* pages) const = 0;
  // Into an empty seq: the KV of snap's first n_tokens (<= its tokens), its
  // pages copied as stored. snap must have passed check_snapshot_compatible
  // against snapshot_header(). On failure (pool full) seq stays empty.
  virtual Status import_seq(int seq, const Snapshot& snap, int64_t n_tokens) = 0;
};

// A prefix_namespace for CacheOptions: XXH3-64 of the model identity (e.g. a
// file hash), the scheme, quant_start, the sliding-window format and key
// centering: everything that changes the KV a token gets. Never 0.
uint64_t make_prefix_namespace(const std::string& model_identity, const CacheOptions& opts,
                               bool key_center);

// Builds the cache named by opts.scheme for the given model shape.
Result<std::unique_ptr<KvCache>> create_cache(const KvShape& shape, const CacheOptions& opts);

}  // namespace tkv::kv
