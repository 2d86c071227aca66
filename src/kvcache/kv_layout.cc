// plan_cache_layout: validation of the cache options against the model shape and
// the store plan (see kv_layout.h). Pool sizes: full-attention stores hold
// max_tokens; sliding-window stores hold, per sequence, the window plus one
// prefill chunk plus slack pages, never more than the full-attention pool.
#include "kvcache/kv_layout.h"

#include <algorithm>

#include "base/checked_math.h"

#include "kernels/attention/attention_quant.h"

namespace tkv::kv {
namespace {

// Operands are bounded by plan_cache_layout (kMaxCacheTokens, kMaxCacheSeqs),
// so page counts cannot overflow; byte totals are checked in add_group.
int64_t ceil_div(int64_t a, int64_t b) {
  return ceil_div_nonneg(a, b);
}

// Adds the stores of one layer group: an optional bf16 prefix, then the scheme.
Status add_group(CacheLayout& lay, const KvShape& shape, const CacheOptions& o,
                 std::vector<int> layers, int64_t window, bool is_float,
                 const quant::KvScheme& scheme) {
  const int g = static_cast<int>(lay.groups.size());
  LayerGroup grp;
  grp.layers = std::move(layers);
  for (size_t i = 0; i < grp.layers.size(); ++i)
    lay.layer_slots[static_cast<size_t>(grp.layers[i])] = {g, static_cast<int>(i)};
  const int64_t full_pages = ceil_div(o.max_tokens, o.page_size);
  // A window store holds window + one chunk + 2 partial pages + 1 slack page per sequence.
  const int64_t win_pages =
      window > 0 ? o.max_seqs * (ceil_div(window + o.max_chunk_tokens, o.page_size) + 3) : 0;
  const auto pages_for = [&](int64_t n_tokens_per_seq) {
    const int64_t cap =
        std::min(full_pages, o.max_seqs * (ceil_div(n_tokens_per_seq, o.page_size) + 1));
    return window > 0 ? std::min(cap, win_pages) : cap;
  };
  // bf16 rows for the --kv-quant-start prefix, --kv-quant-swa bf16 and a bf16 cache;
  // an f16 cache keeps its own kind.
  const quant::KvScheme bf16{quant::KvKind::kBf16, 16, 16, shape.head_dim};
  const quant::KvScheme own = !is_float ? scheme : scheme.is_float() ? scheme : bf16;
  const bool prefix = !is_float && o.quant_start > 0;
  if (prefix) {
    // One view, one query: the prefix's keys are rotated when the scheme's are.
    quant::KvScheme pre = bf16;
    pre.k_rotated = scheme.k_rotated;
    grp.stores.push_back(static_cast<int>(lay.stores.size()));
    lay.stores.push_back({g, pre, 0, o.quant_start, window, pages_for(o.quant_start)});
  }
  grp.stores.push_back(static_cast<int>(lay.stores.size()));
  lay.stores.push_back({g, own, prefix ? o.quant_start : 0, kNoEnd, window,
                        window > 0 ? std::min(full_pages, win_pages) : full_pages});
  const size_t row = static_cast<size_t>(quant::kv_row_layout_of(own).row_bytes);
  const size_t per_tok = row * static_cast<size_t>(shape.n_kv_heads) * grp.layers.size();
  lay.memory.bytes_per_token += per_tok;
  if (window > 0) {
    lay.memory.window_bytes_per_seq +=
        per_tok * static_cast<size_t>(std::min(window, o.max_tokens));
  } else {
    lay.memory.full_bytes_per_token += per_tok;
    if (prefix) {
      lay.memory.prefix_tokens = o.quant_start;
      lay.memory.prefix_bytes_per_token =
          static_cast<size_t>(4 * shape.head_dim * shape.n_kv_heads) * grp.layers.size();
    }
    lay.capacity_tokens = lay.stores.back().n_pages * o.page_size + (prefix ? o.quant_start : 0);
  }
  // Pool bytes of the group's stores, as PagedCache allocates them.
  const size_t n_layers = grp.layers.size();
  for (int sid : grp.stores) {
    const StoreSpec& sp = lay.stores[static_cast<size_t>(sid)];
    const size_t srow = static_cast<size_t>(quant::kv_row_layout_of(sp.scheme).row_bytes);
    size_t b = 0;
    if (!checked_mul(srow * static_cast<size_t>(shape.n_kv_heads),
                     static_cast<size_t>(o.page_size) * static_cast<size_t>(sp.n_pages), &b) ||
        !checked_add(b, static_cast<size_t>(kernels::kKvPoolTailPad), &b) ||
        !checked_mul(b, n_layers, &b) || !checked_add(lay.pool_bytes, b, &lay.pool_bytes))
      return invalid_argument("[kvcache] KV pool size overflows for {} tokens", o.max_tokens);
  }
  lay.groups.push_back(std::move(grp));
  return Status();
}

}  // namespace

Result<CacheLayout> plan_cache_layout(const KvShape& shape, const CacheOptions& o) {
  if (shape.n_layers <= 0 || shape.n_kv_heads <= 0 || shape.head_dim <= 0 ||
      shape.n_layers > 65536 || shape.n_kv_heads > 65536 ||
      static_cast<int>(shape.layer_window.size()) != shape.n_layers)
    return invalid_argument(
        "[kvcache] bad cache shape: {} layers, {} kv heads, head_dim {}, {} windows",
        shape.n_layers, shape.n_kv_heads, shape.head_dim, shape.layer_window.size());
  if (o.page_size <= 0 || o.max_tokens <= 0 || o.max_seqs <= 0 || o.quant_start < 0 ||
      o.max_chunk_tokens <= 0)
    return invalid_argument(
        "[kvcache] bad cache options: page_size {}, max_tokens {}, max_seqs {}, quant_start {}",
        o.page_size, o.max_tokens, o.max_seqs, o.quant_start);
  if (o.max_tokens > kMaxCacheTokens || o.max_chunk_tokens > kMaxCacheTokens ||
      o.quant_start > kMaxCacheTokens || o.max_seqs > kMaxCacheSeqs || o.page_size > 65536)
    return invalid_argument(
        "[kvcache] cache options out of range: context {} (max {}), chunk {} (max {}), "
        "quant_start {} (max {}), max_seqs {} (max {}), page_size {} (max 65536)",
        o.max_tokens, kMaxCacheTokens, o.max_chunk_tokens, kMaxCacheTokens, o.quant_start,
        kMaxCacheTokens, o.max_seqs, kMaxCacheSeqs, o.page_size);
  for (int64_t w : shape.layer_window)
    if (w < 0 || w > kMaxCacheTokens)
      return invalid_argument("[kvcache] sliding window {} out of range [0, {}]", w,
                              kMaxCacheTokens);
  if (shape.head_dim % 8 != 0 || shape.head_dim > 512)
    return invalid_argument(
        "[kvcache] head_dim {} unsupported (needs a multiple of 8, at most 512)", shape.head_dim);
  // bf16 / f16: plain 16-bit float rows (any head_dim % 8 == 0); scheme.kind says which.
  quant::KvScheme scheme = o.scheme;
  scheme.head_dim = 128;  // every scheme's widths and flags are valid at 128
  if (Status st = quant::validate_kv_scheme(scheme); !st.ok())
    return invalid_argument("[kvcache] bad --kv-quant: {}", st.message());
  scheme.head_dim = shape.head_dim;
  const bool is_float = scheme.is_float();
  if (!is_float && !quant::validate_kv_scheme(scheme).ok())
    return invalid_argument(
        "[kvcache] --kv-quant {} needs a full-attention head_dim in {{64, 128, 256, 512}}; this "
        "model has head_dim {} "
        "(use --kv-quant bf16)",
        quant::kv_scheme_name(scheme), shape.head_dim);
  CacheLayout lay;
  lay.layer_slots.resize(static_cast<size_t>(shape.n_layers));
  std::vector<int> full, local;
  int64_t window = 0;
  for (int l = 0; l < shape.n_layers; ++l) {
    const int64_t w = shape.layer_window[static_cast<size_t>(l)];
    (w > 0 ? local : full).push_back(l);
    window = std::max(window, w);
  }
  if (!full.empty()) TKV_RETURN_IF_ERROR(add_group(lay, shape, o, full, 0, is_float, scheme));
  const bool swa_bf16 = !is_float && o.swa_bf16;
  if (!local.empty())
    TKV_RETURN_IF_ERROR(add_group(lay, shape, o, local, window, is_float || swa_bf16, scheme));
  if (full.empty()) lay.capacity_tokens = o.max_tokens;
  lay.swa_bf16_warning = swa_bf16 && !local.empty();
  lay.name = quant::kv_scheme_name(scheme);
  if (!is_float && o.quant_start > 0) lay.name += fmt::format("+bf16<{}", o.quant_start);
  if (lay.swa_bf16_warning) lay.name += "+swa-bf16";
  return lay;
}

}  // namespace tkv::kv
