// PagedCache: one implementation for bf16, affine and TurboQuant KV (see
// paged_cache_impl.h, docs/kv-cache.md). A store covers positions [begin, end) of its
// layers; a page is [n_kv_heads, page_size, row_bytes] so a kv head's tokens are
// contiguous for the fused kernel. Sliding-window stores release pages behind
// the window (one page of slack so short trims stay possible).
#include "kvcache/paged_cache.h"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <utility>

#include "base/check.h"
#include "base/log.h"
#include "kernels/attention/attention_quant.h"
#include "kernels/kvcodec/kvcodec.h"
#include "kvcache/paged_cache_impl.h"
#include "quant/half.h"
#include "quant/kv_math.h"
#include "quant/kv_rotation.h"

namespace tkv::kv {
namespace paged {

void Store::copy_page(int32_t src, int32_t dst) {
  for (auto& pool : pools)
    std::memcpy(pool.get() + int64_t{dst} * page_bytes, pool.get() + int64_t{src} * page_bytes,
                static_cast<size_t>(page_bytes));
}

void PagedCache::copy_page(size_t s, int32_t src, int32_t dst) {
  stores_[s].copy_page(src, dst);
  if (copy_hook_) copy_hook_(static_cast<int>(s), src, dst);
}

PagedCache::PagedCache(const KvShape& shape, const CacheOptions& opts, const CacheLayout& lay)
    : shape_(shape), opts_(opts), lay_(lay), seq_len_(static_cast<size_t>(opts.max_seqs), 0) {}

Status PagedCache::allocate() {
  for (const StoreSpec& sp : lay_.stores) {
    Store st;
    st.spec = sp;
    st.row_bytes = quant::kv_row_layout_of(sp.scheme).row_bytes;
    st.page_bytes = st.row_bytes * shape_.n_kv_heads * opts_.page_size;
    st.pt = std::make_unique<PageTable>(sp.n_pages, opts_.page_size, opts_.max_seqs);
    const size_t bytes = static_cast<size_t>(st.page_bytes * sp.n_pages + kernels::kKvPoolTailPad);
    for (size_t l = 0; l < lay_.groups[static_cast<size_t>(sp.group)].layers.size(); ++l) {
      st.pools.emplace_back(bytes);
      if (!st.pools.back().ok())
        return make_error(StatusCode::kResourceExhausted,
                          "[kvcache] cannot map a KV pool of {} bytes", bytes);
      allocated_ += bytes;
    }
    stores_.push_back(std::move(st));
  }
  prefix_on_ = opts_.prefix_namespace != 0 && prefix_supported();
  return Status();
}

Result<int> PagedCache::create_seq() {
  int id = -1;
  for (auto& st : stores_) {
    TKV_ASSIGN_OR_RETURN(int s, st.pt->create_seq());
    TKV_CHECK(id < 0 || s == id);  // stores move in lockstep
    id = s;
  }
  seq_len_[static_cast<size_t>(id)] = 0;
  return id;
}

void PagedCache::free_seq(int seq) {
  for (auto& st : stores_) st.pt->free_seq(seq);
  seq_len_[static_cast<size_t>(seq)] = 0;
}

Result<int> PagedCache::fork_seq(int src) {
  int id = -1;
  for (size_t i = 0; i < stores_.size(); ++i) {
    int64_t sp = -1, dp = -1;
    TKV_ASSIGN_OR_RETURN(int s, stores_[i].pt->fork_seq(src, &sp, &dp));
    TKV_CHECK(id < 0 || s == id);
    id = s;
    if (sp >= 0) copy_page(i, static_cast<int32_t>(sp), static_cast<int32_t>(dp));
  }
  seq_len_[static_cast<size_t>(id)] = seq_len_[static_cast<size_t>(src)];
  return id;
}

void PagedCache::trim_seq(int seq, int64_t n) {
  if (n >= seq_len(seq)) return;
  n = std::max<int64_t>(n, 0);
  for (auto& st : stores_) {
    const int64_t keep = st.local(n);
    if (st.spec.window > 0 && keep > 0) {
      // The next query (position n) needs keys from n - window + 1 on.
      const int64_t need = st.local(std::max<int64_t>(0, n - st.spec.window + 1));
      TKV_CHECK(st.pt->pages(seq)[static_cast<size_t>(need / opts_.page_size)] >= 0 &&
                "trim_seq past the sliding-window slack: released keys would be needed");
    }
    st.pt->trim(seq, keep);
  }
  seq_len_[static_cast<size_t>(seq)] = n;
}

Status PagedCache::reserve(int seq, int64_t n_new) {
  const int64_t len = seq_len(seq);
  if (n_new > opts_.max_chunk_tokens)
    return invalid_argument("[kvcache] {} new tokens in one pass exceed max_chunk_tokens {}", n_new,
                            opts_.max_chunk_tokens);
  for (size_t i = 0; i < stores_.size(); ++i) {
    Store& st = stores_[i];
    PageCopy cow;
    TKV_RETURN_IF_ERROR(st.pt->reserve(seq, st.local(len + n_new) - st.local(len), &cow));
    if (cow.src >= 0) copy_page(i, cow.src, cow.dst);
  }
  return Status();
}

void PagedCache::commit(int seq, int64_t n_new) {
  const int64_t len = seq_len(seq);
  for (auto& st : stores_) {
    st.pt->commit(seq, st.local(len + n_new) - st.local(len));
    if (st.spec.window > 0) {
      // Keep [next query - window + 1, ...) plus one page of slack for trims.
      const int64_t keep_from = len + n_new - st.spec.window + 1 - opts_.page_size;
      if (keep_from > 0) st.pt->release_before(seq, st.local(keep_from));
    }
  }
  seq_len_[static_cast<size_t>(seq)] = len + n_new;
}

// Encodes tokens [pos0, pos0 + n) ∩ [begin, end) into the store's pages, one
// (page run, kv head) at a time: rows of one head are contiguous in a page.
void PagedCache::write_store(Store& st, int slot, int seq, int64_t pos0, int64_t n, const float* k,
                             const float* v) {
  const int64_t a = std::max(pos0, st.spec.begin), b = std::min(pos0 + n, st.spec.end);
  const int d = shape_.head_dim, nkv = shape_.n_kv_heads, ps = opts_.page_size;
  const auto& pages = st.pt->pages(seq);
  std::vector<float> kh, vh;
  const quant::KvRowLayout lay =
      st.spec.scheme.is_float() ? quant::KvRowLayout{} : quant::kv_row_layout(st.spec.scheme);
  for (int64_t t = a; t < b;) {
    const int64_t local = t - st.spec.begin;
    const int in_page = static_cast<int>(local % ps);
    const int run = static_cast<int>(std::min<int64_t>(ps - in_page, b - t));
    const int32_t page = pages[static_cast<size_t>(local / ps)];
    TKV_CHECK(page >= 0 && st.pt->writable(page));  // never write a shared or indexed page
    for (int h = 0; h < nkv; ++h) {
      uint8_t* dst = st.pools[static_cast<size_t>(slot)].get() + page * st.page_bytes +
                     (int64_t{h} * ps + in_page) * st.row_bytes;
      const float* ks = k + ((t - pos0) * nkv + h) * d;
      const float* vs = v + ((t - pos0) * nkv + h) * d;
      const bool rot = st.spec.scheme.k_rotated;
      if (st.spec.scheme.is_float()) {
        const bool f16 = st.spec.scheme.kind == quant::KvKind::kF16;
        for (int r = 0; r < run; ++r) {
          auto* row = reinterpret_cast<uint16_t*>(dst + r * st.row_bytes);
          const float* kr = ks + int64_t{r} * nkv * d;
          const float* vr = vs + int64_t{r} * nkv * d;
          if (rot) {
            kh.assign(kr, kr + d);
            quant::rotate_key_rows(kh.data(), 1, d);
            kr = kh.data();
          }
          for (int e = 0; e < d; ++e) {
            row[e] = f16 ? quant::f16_kv_encode(kr[e]) : f32_to_bf16(kr[e]);
            row[d + e] = f16 ? quant::f16_kv_encode(vr[e]) : f32_to_bf16(vr[e]);
          }
        }
        continue;
      }
      kh.resize(static_cast<size_t>(run) * d);
      vh.resize(kh.size());
      for (int r = 0; r < run; ++r) {
        std::memcpy(&kh[static_cast<size_t>(r) * d], ks + int64_t{r} * nkv * d,
                    sizeof(float) * static_cast<size_t>(d));
        std::memcpy(&vh[static_cast<size_t>(r) * d], vs + int64_t{r} * nkv * d,
                    sizeof(float) * static_cast<size_t>(d));
      }
      if (rot) quant::rotate_key_rows(kh.data(), run, d);
      kernels::KvEncodeParams p;
      p.scheme = st.spec.scheme;
      p.n_rows = run;
      p.k = kh.data();
      p.v = vh.data();
      p.out = kernels::kv_planes_interleaved(dst, lay);
      static ThreadPool serial(1);  // a run is <= one page of rows: encode inline
      kernels::kvcodec_encode_cpu(p, &serial);
    }
    t += run;
  }
}

void PagedCache::write(int layer, int seq, int64_t pos0, int64_t n, const float* k,
                       const float* v) {
  const LayerSlot& ls = lay_.layer_slots[static_cast<size_t>(layer)];
  for (int s : lay_.groups[static_cast<size_t>(ls.group)].stores)
    write_store(stores_[static_cast<size_t>(s)], ls.slot, seq, pos0, n, k, v);
}

kernels::KvView PagedCache::view(int layer, int seq, int64_t n_tokens) const {
  const LayerSlot& ls = lay_.layer_slots[static_cast<size_t>(layer)];
  kernels::KvView kv;
  for (int s : lay_.groups[static_cast<size_t>(ls.group)].stores) {
    const Store& st = stores_[static_cast<size_t>(s)];
    kernels::KvSegmentView& v = kv.segs[kv.n_segs];
    v.format = {st.spec.scheme, shape_.n_kv_heads, opts_.page_size};
    v.pool = st.pools[static_cast<size_t>(ls.slot)].get();
    v.page_ids = st.pt->pages(seq).data();
    v.pos0 = st.spec.begin;
    v.n_kv = st.local(n_tokens);
    if (v.n_kv > 0) ++kv.n_segs;
  }
  return kv;
}

std::vector<KvCache::LayerStore> PagedCache::layer_stores(int layer) const {
  const LayerSlot& ls = lay_.layer_slots[static_cast<size_t>(layer)];
  std::vector<LayerStore> out;
  for (int s : lay_.groups[static_cast<size_t>(ls.group)].stores) {
    const Store& st = stores_[static_cast<size_t>(s)];
    out.push_back({{st.spec.scheme, shape_.n_kv_heads, opts_.page_size},
                   st.spec.n_pages,
                   st.spec.begin,
                   st.spec.window});
  }
  return out;
}

}  // namespace paged

Result<std::unique_ptr<KvCache>> create_paged_cache(const KvShape& shape,
                                                    const CacheOptions& opts) {
  TKV_ASSIGN_OR_RETURN(CacheLayout lay, plan_cache_layout(shape, opts));
  if (lay.swa_bf16_warning) {
    static std::once_flag once;
    std::call_once(once, [] {
      TKV_LOG_WARN(
          "[kvcache] --kv-quant-swa bf16: sliding-window layers keep a bf16 cache (full layers are "
          "quantized)");
    });
  }
  TKV_RETURN_IF_ERROR(check_kv_budget(shape, opts, lay));
  try {
    std::unique_ptr<paged::PagedCache> c(new paged::PagedCache(shape, opts, lay));
    TKV_RETURN_IF_ERROR(c->allocate());
    return std::unique_ptr<KvCache>(std::move(c));
  } catch (const std::bad_alloc&) {
    return make_error(StatusCode::kResourceExhausted,
                      "[kvcache] out of host memory building a cache of {} tokens",
                      opts.max_tokens);
  }
}

}  // namespace tkv::kv
