// bf16 paged cache: one page pool per layer for K and one for V, indexed by the
// shared PageTable. Attention is the paged bf16 CPU kernel.
#include "kvcache/bf16_cache.h"

#include <cstring>

#include "base/check.h"
#include "kvcache/page_table.h"
#include "quant/half.h"

namespace tkv::kv {
namespace {

class Bf16Cache final : public KvCache {
 public:
  Bf16Cache(const KvShape& shape, const CacheOptions& opts)
      : shape_(shape),
        pages_((opts.max_tokens + opts.page_size - 1) / opts.page_size, opts.page_size, opts.max_seqs) {
    row_elems_ = static_cast<size_t>(shape.n_kv_heads) * shape.head_dim;
    page_elems_ = row_elems_ * opts.page_size;
    const size_t pool = page_elems_ * static_cast<size_t>(pages_.n_pages());
    k_.resize(static_cast<size_t>(shape.n_layers));
    v_.resize(static_cast<size_t>(shape.n_layers));
    for (int l = 0; l < shape.n_layers; ++l) {
      k_[static_cast<size_t>(l)].reset(new uint16_t[pool]);
      v_[static_cast<size_t>(l)].reset(new uint16_t[pool]);
    }
    allocated_ = pool * 2 * sizeof(uint16_t) * static_cast<size_t>(shape.n_layers);
  }

  Result<int> create_seq() override { return pages_.create_seq(); }
  void free_seq(int seq) override { pages_.free_seq(seq); }
  Result<int> fork_seq(int src) override {
    int64_t sp = -1, dp = -1;
    TKV_ASSIGN_OR_RETURN(int dst, pages_.fork_seq(src, &sp, &dp));
    if (sp >= 0) copy_page(sp, dp);
    return dst;
  }
  int64_t seq_len(int seq) const override { return pages_.seq_len(seq); }
  void trim_seq(int seq, int64_t n) override { pages_.trim(seq, n); }
  Status reserve(int seq, int64_t n_new) override { return pages_.reserve(seq, n_new); }
  void commit(int seq, int64_t n_new) override { pages_.commit(seq, n_new); }

  void write(int layer, int seq, int64_t pos0, int64_t n, const float* k, const float* v) override {
    const auto& pl = pages_.pages(seq);
    const int ps = pages_.page_size();
    for (int64_t t = 0; t < n; ++t) {
      const int64_t pos = pos0 + t;
      const size_t page = static_cast<size_t>(pl[static_cast<size_t>(pos / ps)]);
      TKV_CHECK(pages_.refcount(static_cast<int32_t>(page)) == 1);
      const size_t off = page * page_elems_ + static_cast<size_t>(pos % ps) * row_elems_;
      uint16_t* kd = k_[static_cast<size_t>(layer)].get() + off;
      uint16_t* vd = v_[static_cast<size_t>(layer)].get() + off;
      const float* ks = k + static_cast<size_t>(t) * row_elems_;
      const float* vs = v + static_cast<size_t>(t) * row_elems_;
      for (size_t e = 0; e < row_elems_; ++e) {
        kd[e] = f32_to_bf16(ks[e]);
        vd[e] = f32_to_bf16(vs[e]);
      }
    }
  }

  void attend(int layer, int seq, const kernels::AttnArgs& a, ThreadPool& pool) override {
    kernels::PagedBf16View view;
    view.k_pool = k_[static_cast<size_t>(layer)].get();
    view.v_pool = v_[static_cast<size_t>(layer)].get();
    view.page_ids = pages_.pages(seq).data();
    view.page_size = pages_.page_size();
    view.n_kv_heads = shape_.n_kv_heads;
    view.head_dim = shape_.head_dim;
    view.n_kv = a.q_pos0 + a.n_q;
    kernels::attention_bf16_cpu(view, a, pool);
  }

  const KvShape& shape() const override { return shape_; }
  std::string scheme_name() const override { return "bf16"; }
  size_t bytes_per_token() const override { return row_elems_ * 2 * sizeof(uint16_t) * static_cast<size_t>(shape_.n_layers); }
  size_t allocated_bytes() const override { return allocated_; }
  int64_t capacity_tokens() const override { return pages_.n_pages() * pages_.page_size(); }

 private:
  void copy_page(int64_t src, int64_t dst) {
    for (int l = 0; l < shape_.n_layers; ++l) {
      for (auto* pool : {k_[static_cast<size_t>(l)].get(), v_[static_cast<size_t>(l)].get()})
        std::memcpy(pool + static_cast<size_t>(dst) * page_elems_, pool + static_cast<size_t>(src) * page_elems_,
                    page_elems_ * sizeof(uint16_t));
    }
  }
  KvShape shape_;
  PageTable pages_;
  size_t row_elems_ = 0, page_elems_ = 0, allocated_ = 0;
  std::vector<std::unique_ptr<uint16_t[]>> k_, v_;
};

}  // namespace

Result<std::unique_ptr<KvCache>> create_bf16_cache(const KvShape& shape, const CacheOptions& opts) {
  if (shape.n_layers <= 0 || shape.n_kv_heads <= 0 || shape.head_dim <= 0 || opts.page_size <= 0 || opts.max_tokens <= 0)
    return invalid_argument("[kvcache] bad cache shape");
  return std::unique_ptr<KvCache>(new Bf16Cache(shape, opts));
}

}  // namespace tkv::kv
