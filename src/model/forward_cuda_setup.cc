// CudaForward setup: what the CUDA forward supports (checked once, with a message
// naming what is missing), the weight upload (each matrix as stored in the GGUF,
// read once through pinned staging) and the device KV pools, one set of planes per
// layer with the host cache's page count, so the host's page ids index them.
#include <cstdlib>
#include <string>

#include "base/check.h"
#include "device/cuda_check.h"
#include "device/device.h"
#include "kernels/attention_cuda/attention_cuda.h"
#include "kernels/attention_cuda/prefill_cuda.h"
#include "kernels/kvcodec/turbo_tables_cuda.h"
#include "kernels/matmul_cuda/gemm_cuda.h"
#include "model/forward_cuda.h"
#include "ops/dispatch.h"

namespace tkv::model {
namespace {
Status unsupported(const std::string& what) {
  return make_error(StatusCode::kUnimplemented, "[cuda] --device cuda: {} (not on CUDA yet)", what);
}
}  // namespace

CudaForward::~CudaForward() {
  for (auto& [n, g] : graphs_)
    if (g.exec) cudaGraphExecDestroy(g.exec);
  kernels::gemm_cuda_destroy(cublas_);
  if (stream_) cudaStreamDestroy(stream_);
}

Status CudaForward::upload_matrix(const kernels::WeightView& w, DevMatrix* m) {
  if (!kernels::gemv_cuda_supports(w.type))
    return unsupported(fmt::format("weight type {} has no CUDA GEMV", ggml::traits(w.type).name));
  const size_t bytes = ggml::row_bytes(w.type, w.n_in) * static_cast<size_t>(w.n_out);
  TKV_ASSIGN_OR_RETURN(m->buf, device::upload_to_device(w.data, bytes, staging_, stream_));
  m->type = w.type;
  m->n_in = w.n_in;
  m->n_out = w.n_out;
  return Status();
}

Status CudaForward::upload_fused(const std::vector<const kernels::WeightView*>& ws,
                                 const std::vector<DevMatrix*>& parts, DevMatrix* fused) {
  bool same = true;
  size_t total = 0;
  for (const kernels::WeightView* w : ws) {
    same = same && w->type == ws[0]->type && w->n_in == ws[0]->n_in;
    total += ggml::row_bytes(w->type, w->n_in) * static_cast<size_t>(w->n_out);
  }
  if (!same || !kernels::gemv_cuda_supports(ws[0]->type)) {
    for (size_t i = 0; i < ws.size(); ++i) TKV_RETURN_IF_ERROR(upload_matrix(*ws[i], parts[i]));
    return Status();
  }
  TKV_ASSIGN_OR_RETURN(fused->buf, device::CudaBuffer::allocate(total));
  fused->type = ws[0]->type;
  fused->n_in = ws[0]->n_in;
  fused->n_out = 0;
  size_t off = 0;
  for (size_t i = 0; i < ws.size(); ++i) {
    const size_t bytes =
        ggml::row_bytes(ws[i]->type, ws[i]->n_in) * static_cast<size_t>(ws[i]->n_out);
    uint8_t* dst = static_cast<uint8_t*>(fused->buf.data()) + off;
    TKV_RETURN_IF_ERROR(staging_.upload(ws[i]->data, bytes, dst, stream_));
    parts[i]->view = dst;
    parts[i]->type = ws[i]->type;
    parts[i]->n_in = ws[i]->n_in;
    parts[i]->n_out = ws[i]->n_out;
    fused->n_out += ws[i]->n_out;
    off += bytes;
  }
  return Status();
}

Result<const float*> CudaForward::upload_vector(const std::vector<float>& v) {
  if (v.empty()) return static_cast<const float*>(nullptr);
  TKV_ASSIGN_OR_RETURN(
      device::CudaBuffer b,
      device::upload_to_device(v.data(), v.size() * sizeof(float), staging_, stream_));
  vectors_.push_back(std::move(b));
  return static_cast<const float*>(vectors_.back().data());
}

Status CudaForward::init(const kv::KvCache& cache) {
  const ModelConfig& c = cfg_;
  if (!ops::backend_available(ops::Backend::kCuda))
    return make_error(StatusCode::kUnimplemented, "[cuda] --device cuda: no CUDA device ({})",
                      device::cuda_device_summary());
  for (int il = 0; il < c.n_layers; ++il) {
    if (c.layer_window[static_cast<size_t>(il)] > 0)
      return unsupported("sliding-window attention (" + c.arch + ")");
    const auto st = cache.layer_stores(il);
    if (st.size() != 1 || st[0].begin != 0)
      return unsupported("a cache of several stores (--kv-quant-start)");
    if (il == 0) kv_format_ = st[0].format;
    const quant::KvScheme& s = st[0].format.scheme;
    if (!(s.kind == quant::KvKind::kBf16 || s.kind == quant::KvKind::kTurbo))
      return unsupported("KV scheme " + cache.scheme_name() + " (bf16 and turbo are)");
    if (s.cpu_only())
      return unsupported("symmetric keys or the absmax value codebook (" + cache.scheme_name() +
                         ")");
  }
  if (c.n_heads % c.n_kv_heads != 0) return unsupported("n_heads not a multiple of n_kv_heads");
  prefill_ok_ = kernels::prefill_cuda_supports(kv_format_, c.n_heads);  // else decode per token
  if (kv_format_.scheme.k_rotated) {
    k_signs_ = kernels::turbo_signs_cuda(c.head_dim);
    if (!k_signs_) return unsupported("rotated keys at head_dim " + std::to_string(c.head_dim));
  }
  if (const char* g = std::getenv("TKV_CUDA_GRAPHS")) graphs_on_ = std::string(g) != "0";
  if (const char* a = std::getenv("TKV_CUDA_ATTN")) tc_attn_ = std::string(a) != "general";
  if (const char* g = std::getenv("TKV_CUDA_PDL")) pdl_on_ = std::string(g) != "0";
  if (const char* g = std::getenv("TKV_CUDA_GEMV")) {
    using V = kernels::GemvCudaParams::Variant;
    const std::string v(g);
    if (v != "block" && v != "auto") return unsupported("TKV_CUDA_GEMV=" + v + " (block or auto)");
    gemv_variant_ = v == "block" ? V::kBlock : V::kAuto;
  }
  TKV_RETURN_IF_ERROR(device::cuda_status(
      cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "[cuda] stream"));
  int dev = 0;
  TKV_RETURN_IF_ERROR(device::cuda_status(cudaGetDevice(&dev), "[cuda] device"));
  TKV_RETURN_IF_ERROR(device::cuda_status(
      cudaDeviceGetAttribute(&sm_count_, cudaDevAttrMultiProcessorCount, dev), "[cuda] SMs"));
  attn_scale_ = c.attn_scale > 0 ? c.attn_scale : 1.0f / std::sqrt(static_cast<float>(c.head_dim));

  TKV_RETURN_IF_ERROR(upload_matrix(w_.output, &output_));
  TKV_ASSIGN_OR_RETURN(output_norm_, upload_vector(w_.output_norm));
  const kv::KvCache::LayerStore st0 = cache.layer_stores(0)[0];
  const quant::KvRowLayout rl = kv_format_.rows();
  n_pages_ = st0.n_pages;
  const size_t rows = static_cast<size_t>(st0.n_pages) * c.n_kv_heads * kv_format_.page_size;
  layers_.resize(static_cast<size_t>(c.n_layers));
  for (int il = 0; il < c.n_layers; ++il) {
    const LayerWeights& L = w_.layers[static_cast<size_t>(il)];
    DevLayer& D = layers_[static_cast<size_t>(il)];
    TKV_RETURN_IF_ERROR(upload_fused({&L.wq, &L.wk, &L.wv}, {&D.wq, &D.wk, &D.wv}, &D.wqkv));
    TKV_RETURN_IF_ERROR(upload_matrix(L.wo, &D.wo));
    TKV_RETURN_IF_ERROR(upload_fused({&L.w_gate, &L.w_up}, {&D.w_gate, &D.w_up}, &D.w_gu));
    TKV_RETURN_IF_ERROR(upload_matrix(L.w_down, &D.w_down));
    TKV_ASSIGN_OR_RETURN(D.attn_norm, upload_vector(L.attn_norm));
    TKV_ASSIGN_OR_RETURN(D.ffn_norm, upload_vector(L.ffn_norm));
    TKV_ASSIGN_OR_RETURN(D.post_attn_norm, upload_vector(L.post_attn_norm));
    TKV_ASSIGN_OR_RETURN(D.post_ffn_norm, upload_vector(L.post_ffn_norm));
    TKV_ASSIGN_OR_RETURN(D.q_norm, upload_vector(L.q_norm));
    TKV_ASSIGN_OR_RETURN(D.k_norm, upload_vector(L.k_norm));
    if (c.qkv_bias) {
      TKV_ASSIGN_OR_RETURN(D.bq, upload_vector(L.bq));
      TKV_ASSIGN_OR_RETURN(D.bk, upload_vector(L.bk));
      TKV_ASSIGN_OR_RETURN(D.bv, upload_vector(L.bv));
      if (key_center_) {
        TKV_ASSIGN_OR_RETURN(D.k_center, upload_vector(L.k_center));
      }
    }
    // The pools: zero-filled like the host's lazy pools (stale rows past a
    // sequence's end are masked by the kernels, but never uninitialised NaNs).
    auto plane = [&](int64_t row_bytes, device::CudaBuffer* b) -> Status {
      if (row_bytes == 0) return Status();
      TKV_ASSIGN_OR_RETURN(*b, device::CudaBuffer::allocate(rows * static_cast<size_t>(row_bytes)));
      return device::cuda_status(cudaMemsetAsync(b->data(), 0, b->bytes(), stream_),
                                 "[cuda] pool clear");
    };
    TKV_RETURN_IF_ERROR(plane(rl.k_data_bytes, &D.k_data));
    TKV_RETURN_IF_ERROR(plane(rl.v_data_bytes, &D.v_data));
    TKV_RETURN_IF_ERROR(plane(rl.k_scale_bytes, &D.k_scale));
    TKV_RETURN_IF_ERROR(plane(rl.k_zero_bytes, &D.k_zero));
    TKV_RETURN_IF_ERROR(plane(rl.v_scale_bytes, &D.v_scale));
  }
  return device::cuda_status(cudaStreamSynchronize(stream_), "[cuda] upload");
}

void CudaForward::copy_page(int32_t src, int32_t dst) {
  if (src < 0 || dst < 0 || src >= n_pages_ || dst >= n_pages_) {
    copy_error_ = make_error(StatusCode::kInternal, "[cuda] page copy {} -> {} of {} pages", src,
                             dst, n_pages_);
    return;
  }
  for (DevLayer& D : layers_)
    for (device::CudaBuffer* b : {&D.k_data, &D.v_data, &D.k_scale, &D.k_zero, &D.v_scale}) {
      if (b->bytes() == 0) continue;
      const size_t page = b->bytes() / static_cast<size_t>(n_pages_);
      uint8_t* base = static_cast<uint8_t*>(b->data());
      const cudaError_t e = cudaMemcpyAsync(base + page * static_cast<size_t>(dst),
                                            base + page * static_cast<size_t>(src), page,
                                            cudaMemcpyDeviceToDevice, stream_);
      if (e != cudaSuccess && copy_error_.ok())
        copy_error_ = device::cuda_status(e, "[cuda] page copy");
    }
}

Result<std::unique_ptr<DeviceForward>> make_cuda_forward(const ModelConfig& c, const Weights& w,
                                                         const kv::KvCache& cache,
                                                         bool key_center) {
  auto f = std::make_unique<CudaForward>(c, w, key_center && c.qkv_bias);
  TKV_RETURN_IF_ERROR(f->init(cache));
  return std::unique_ptr<DeviceForward>(std::move(f));
}

}  // namespace tkv::model
