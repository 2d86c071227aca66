// Model loading: architecture lookup, tensor binding and shape checks.
#include "model/model.h"

#include <fmt/ranges.h>

#include "base/log.h"
#include "model/config_check.h"
#include "model/registry.h"

namespace tkv::model {
namespace {

// A row copy out of the mapping, run under GgufFile::guarded_read: plain data
// only, so a SIGBUS (file truncated) can jump back over it.
struct DequantJob {
  ggml::Type type;
  const uint8_t* src;  // [row bytes] in the mapping
  float* dst;          // [n]
  int64_t n;
  static void run(void* p) {
    auto* j = static_cast<DequantJob*>(p);
    kernels::dequantize_row(j->type, j->src, j->dst, j->n);
  }
};

struct Binder {
  const io::GgufFile& g;
  Status st;

  // A known type we cannot dequantize (e.g. q8_1) must stop here, not reach
  // the TKV_CHECK inside dequantize_row.
  bool supported(const io::GgufTensorInfo& t) {
    if (ggml::traits(t.type).supported) return true;
    if (st.ok())
      st = invalid_argument("[model] {}: tensor '{}' has type {}, which cannot be dequantized",
                            g.path(), t.name, ggml::traits(t.type).name);
    return false;
  }
  const io::GgufTensorInfo* find(const std::string& name, bool required) {
    if (!st.ok()) return nullptr;  // stop at the first error
    const io::GgufTensorInfo* t = g.find_tensor(name);
    if (!t && required && st.ok())
      st = invalid_argument("[model] {}: missing tensor '{}'", g.path(), name);
    return t;
  }
  kernels::WeightView matrix(const std::string& name, int64_t n_in, int64_t n_out,
                             bool required = true) {
    const io::GgufTensorInfo* t = find(name, required);
    if (!t) return {};
    if (t->shape.size() != 2 || t->shape[0] != n_in || t->shape[1] != n_out) {
      if (st.ok())
        st = invalid_argument("[model] {}: tensor '{}' has shape [{}], expected [{}, {}]", g.path(),
                              name, fmt::join(t->shape, ", "), n_in, n_out);
      return {};
    }
    if (!supported(*t)) return {};
    return kernels::WeightView{t->data, t->type, n_in, n_out};
  }
  std::vector<float> vec(const std::string& name, int64_t n, bool required = true) {
    const io::GgufTensorInfo* t = find(name, required);
    if (!t) return {};
    if (t->n_elems() != n) {
      if (st.ok())
        st = invalid_argument("[model] {}: tensor '{}' has {} elements, expected {}", g.path(),
                              name, t->n_elems(), n);
      return {};
    }
    if (!supported(*t)) return {};
    std::vector<float> out(static_cast<size_t>(n));
    DequantJob job{t->type, t->data, out.data(), n};
    Status rs = g.guarded_read(&DequantJob::run, &job);
    if (!rs.ok()) {
      if (st.ok()) st = std::move(rs);
      return {};
    }
    return out;
  }
};

}  // namespace

Result<std::unique_ptr<Model>> Model::load(const std::string& path) {
  TKV_ASSIGN_OR_RETURN(auto gguf, io::GgufFile::open(path));
  TKV_ASSIGN_OR_RETURN(std::string arch, gguf->get_string("general.architecture"));
  const ArchSpec* spec = find_arch(arch);
  if (!spec)
    return invalid_argument("[model] {}: unsupported architecture '{}' (supported: {})", path, arch,
                            fmt::join(registered_archs(), ", "));
  std::unique_ptr<Model> m(new Model());
  m->gguf_ = std::move(gguf);
  // Allocation failures (a huge but consistent model) become a Status here,
  // where std code enters the load path.
  try {
    TKV_RETURN_IF_ERROR(spec->configure(*m->gguf_, m->cfg_));
    TKV_RETURN_IF_ERROR(validate_config(m->cfg_, *m->gguf_));
    TKV_RETURN_IF_ERROR(m->bind_weights());
  } catch (const std::exception& e) {
    return make_error(StatusCode::kResourceExhausted, "[model] {}: loading failed: {}", path,
                      e.what());
  }
  return m;
}

Status Model::bind_weights() {
  Binder b{*gguf_, Status()};
  const ModelConfig& c = cfg_;
  const int64_t d = c.d_model, q_dim = int64_t{c.n_heads} * c.head_dim,
                kv_dim = int64_t{c.n_kv_heads} * c.head_dim;
  w_.tok_embd = b.matrix("token_embd.weight", d, c.n_vocab);
  w_.output = b.matrix("output.weight", d, c.n_vocab, /*required=*/false);
  if (!w_.output.data) w_.output = w_.tok_embd;  // tied embeddings
  w_.output_norm = b.vec("output_norm.weight", d);
  w_.layers.resize(static_cast<size_t>(c.n_layers));
  for (int il = 0; il < c.n_layers && b.st.ok(); ++il) {
    LayerWeights& L = w_.layers[static_cast<size_t>(il)];
    const std::string p = "blk." + std::to_string(il) + ".";
    L.wq = b.matrix(p + "attn_q.weight", d, q_dim);
    L.wk = b.matrix(p + "attn_k.weight", d, kv_dim);
    L.wv = b.matrix(p + "attn_v.weight", d, kv_dim);
    L.wo = b.matrix(p + "attn_output.weight", q_dim, d);
    L.w_gate = b.matrix(p + "ffn_gate.weight", d, c.d_ff);
    L.w_up = b.matrix(p + "ffn_up.weight", d, c.d_ff);
    L.w_down = b.matrix(p + "ffn_down.weight", c.d_ff, d);
    L.attn_norm = b.vec(p + "attn_norm.weight", d);
    L.ffn_norm = b.vec(p + "ffn_norm.weight", d);
    if (c.qkv_bias) {
      L.bq = b.vec(p + "attn_q.bias", q_dim);
      L.bk = b.vec(p + "attn_k.bias", kv_dim);
      L.k_center.resize(L.bk.size());
      for (size_t i = 0; i < L.bk.size(); ++i) L.k_center[i] = -L.bk[i];
      L.bv = b.vec(p + "attn_v.bias", kv_dim);
    }
    if (c.qk_norm) {
      L.q_norm = b.vec(p + "attn_q_norm.weight", c.head_dim);
      L.k_norm = b.vec(p + "attn_k_norm.weight", c.head_dim);
    }
    if (c.post_norms) {
      L.post_attn_norm = b.vec(p + "post_attention_norm.weight", d);
      L.post_ffn_norm = b.vec(p + "post_ffw_norm.weight", d);
    }
  }
  return b.st;
}

kv::KvShape Model::kv_shape() const {
  kv::KvShape s;
  s.n_layers = cfg_.n_layers;
  s.n_kv_heads = cfg_.n_kv_heads;
  s.head_dim = cfg_.head_dim;
  s.layer_window = cfg_.layer_window;
  return s;
}

size_t Model::weight_bytes_per_token() const {
  auto bytes = [](const kernels::WeightView& w) {
    return ggml::row_bytes(w.type, w.n_in) * static_cast<size_t>(w.n_out);
  };
  size_t total = bytes(w_.output) + ggml::row_bytes(w_.tok_embd.type, w_.tok_embd.n_in);
  for (const auto& L : w_.layers)
    total += bytes(L.wq) + bytes(L.wk) + bytes(L.wv) + bytes(L.wo) + bytes(L.w_gate) +
             bytes(L.w_up) + bytes(L.w_down);
  return total;
}

}  // namespace tkv::model
