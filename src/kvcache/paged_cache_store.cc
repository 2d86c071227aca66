// Snapshots of PagedCache (kv_store.h): a sequence's pages copied out and back
// in exactly as stored, in file order (store, layer of its group, page). A page
// is [n_kv_heads, page_size, row_bytes]; only the rows a page holds are copied
// (all of them but in the last page), so a snapshot never carries stale rows.
// Sliding-window stores (Gemma 3) are refused for now: their released pages
// would need a rotation-aware format.
#include <cstring>

#include "base/check.h"
#include "kvcache/paged_cache_impl.h"

namespace tkv::kv::paged {
namespace {

int32_t store_kind(const StoreSpec& sp) {
  return static_cast<int32_t>(sp.scheme.kind);  // a float store's scheme is bf16 or f16
}

}  // namespace

Result<SnapshotHeader> PagedCache::snapshot_header() const {
  SnapshotHeader h;
  for (const Store& st : stores_) {
    if (st.spec.window > 0)
      return invalid_argument(
          "[kv-store] snapshots of sliding-window layers (e.g. Gemma 3) are not supported yet");
    SnapshotStore s;
    s.begin = st.spec.begin;
    s.end = st.spec.end;
    s.n_layers =
        static_cast<int32_t>(lay_.groups[static_cast<size_t>(st.spec.group)].layers.size());
    s.row_bytes = static_cast<int32_t>(st.row_bytes);
    s.kind = store_kind(st.spec);
    s.k_bits = st.spec.scheme.is_float() ? 16 : st.spec.scheme.k_bits;
    s.v_bits = st.spec.scheme.is_float() ? 16 : st.spec.scheme.v_bits;
    h.stores.push_back(s);
  }
  const SnapshotStore& main = h.stores.back();  // the scheme store
  h.scheme = lay_.name;
  h.kind = main.kind;
  h.k_bits = main.k_bits;
  h.v_bits = main.v_bits;
  h.head_dim = shape_.head_dim;
  h.n_layers = shape_.n_layers;
  h.n_kv_heads = shape_.n_kv_heads;
  h.page_size = opts_.page_size;
  h.quant_start = opts_.quant_start;
  h.swa_bf16 = opts_.swa_bf16;
  return h;
}

Status PagedCache::export_seq(int seq, int64_t n_tokens,
                              std::vector<std::vector<uint8_t>>* pages) const {
  TKV_ASSIGN_OR_RETURN(SnapshotHeader h, snapshot_header());
  TKV_CHECK(stores_.front().pt->valid_seq(seq) && n_tokens >= 0 && n_tokens <= seq_len(seq));
  const int ps = opts_.page_size;
  pages->clear();
  for (size_t s = 0; s < stores_.size(); ++s) {
    const Store& st = stores_[s];
    const int64_t local = st.local(n_tokens);
    const int64_t n_pages = (local + ps - 1) / ps;
    for (size_t l = 0; l < st.pools.size(); ++l) {
      for (int64_t p = 0; p < n_pages; ++p) {
        const int32_t page = st.pt->pages(seq)[static_cast<size_t>(p)];
        TKV_CHECK(page >= 0);
        const int64_t rows = std::min<int64_t>(ps, local - p * ps);
        std::vector<uint8_t>& out = pages->emplace_back(
            static_cast<size_t>(snapshot_page_bytes(h, h.stores[s], n_tokens, p)));
        const uint8_t* src = st.pools[l].get() + page * st.page_bytes;
        for (int hd = 0; hd < shape_.n_kv_heads; ++hd)
          std::memcpy(out.data() + hd * rows * st.row_bytes, src + int64_t{hd} * ps * st.row_bytes,
                      static_cast<size_t>(rows * st.row_bytes));
      }
    }
  }
  return Status();
}

Status PagedCache::import_seq(int seq, const Snapshot& snap, int64_t n_tokens) {
  TKV_CHECK(stores_.front().pt->valid_seq(seq) && seq_len(seq) == 0);
  TKV_CHECK(n_tokens >= 0 && n_tokens <= snap.header.n_tokens());
  TKV_CHECK(snap.header.stores.size() == stores_.size());
  const int ps = opts_.page_size;
  // Check every store has room first, so a refusal changes nothing.
  for (const Store& st : stores_) {
    const int64_t need = (st.local(n_tokens) + ps - 1) / ps;
    if (need > st.pt->n_available_pages())
      return make_error(StatusCode::kResourceExhausted,
                        "[kv-store] no room to load a snapshot of {} tokens: {} pages needed, {} "
                        "available",
                        n_tokens, need, st.pt->n_available_pages());
  }
  for (size_t s = 0; s < stores_.size(); ++s) {
    Store& st = stores_[s];
    const int64_t local = st.local(n_tokens);
    const int64_t snap_local = st.local(snap.header.n_tokens());
    TKV_CHECK(st.pt->reserve(seq, local).ok());
    st.pt->commit(seq, local);
    for (size_t l = 0; l < st.pools.size(); ++l) {
      for (int64_t p = 0; p * ps < local; ++p) {
        const int32_t page = st.pt->pages(seq)[static_cast<size_t>(p)];
        TKV_CHECK(page >= 0 && st.pt->writable(page));
        const int64_t rows = std::min<int64_t>(ps, local - p * ps);
        const int64_t src_rows = std::min<int64_t>(ps, snap_local - p * ps);  // rows in the file
        int64_t n_bytes = 0;
        const uint8_t* src = snap.page(s, static_cast<int>(l), p, &n_bytes);
        TKV_CHECK(n_bytes == src_rows * st.row_bytes * shape_.n_kv_heads);
        uint8_t* dst = st.pools[l].get() + page * st.page_bytes;
        for (int hd = 0; hd < shape_.n_kv_heads; ++hd)
          std::memcpy(dst + int64_t{hd} * ps * st.row_bytes, src + hd * src_rows * st.row_bytes,
                      static_cast<size_t>(rows * st.row_bytes));
      }
    }
  }
  seq_len_[static_cast<size_t>(seq)] = n_tokens;
  return Status();
}

}  // namespace tkv::kv::paged
