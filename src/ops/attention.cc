// ops::attention: argument checks, backend dispatch, and the CPU paths (fused,
// reference, and verify = fused checked against the reference).
#include "ops/attention.h"

#include <algorithm>
#include <cmath>
#include <tuple>
#include <utility>
#include <vector>

#include "base/log.h"
#include "kernels/attention/attention_fused_bound.h"
#include "quant/kv_rotation.h"

namespace tkv::ops {
namespace {

Status check_args(const kernels::AttnArgs& a, const kernels::KvView& kv) {
  if (kv.n_segs <= 0 || kv.n_segs > kernels::kMaxKvSegments)
    return invalid_argument("[ops] attention over a view of {} segments", kv.n_segs);
  const int nkv = kv.segs[0].format.n_kv_heads;
  if (!a.q || !a.out || a.n_q <= 0 || a.n_heads <= 0 || nkv <= 0 || a.n_heads % nkv != 0)
    return invalid_argument("[ops] attention: {} queries of {} heads over {} kv heads", a.n_q,
                            a.n_heads, nkv);
  for (int i = 1; i < kv.n_segs; ++i)
    if (kv.segs[i].format.scheme.k_rotated != kv.segs[0].format.scheme.k_rotated)
      return invalid_argument("[ops] attention over rotated and unrotated keys in one view");
  if (kv.n_total() < a.q_pos0 + a.n_q)
    return invalid_argument("[ops] attention: queries up to position {} over {} cached tokens",
                            a.q_pos0 + a.n_q - 1, kv.n_total());
  return Status();
}

// max |out - ref| and max |ref| of one call.
std::pair<double, double> diff(const std::vector<float>& ref, const float* out) {
  double err = 0, mag = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    err = std::max(err, static_cast<double>(std::fabs(ref[i] - out[i])));
    mag = std::max(mag, static_cast<double>(std::fabs(ref[i])));
  }
  return {err, mag};
}

// a.out holds the fused output: compare it with the reference fed the fused
// kernel's query, and (where that query is int8) with the fp32-query reference.
// Where the fused kernel accumulates V with int8 dots (kernels::fused_int8_values), the
// sharp fp32 check runs on its fp32-V twin (FusedIsa::kAvx512), and the int8 V's own
// deviation from that twin is held to its derived bound.
void verify(const kernels::AttnArgs& a, const kernels::KvView& kv, AttnCheckLog* log,
            ThreadPool& pool) {
  const int d = kv.segs[0].format.head_dim();
  const size_t n_out = static_cast<size_t>(a.n_q * a.n_heads * d);
  std::vector<float> ref(n_out), twin;
  kernels::AttnArgs r = a;
  r.out = ref.data();
  kernels::attention_paged_ref(kv.segs, kv.n_segs, r, kernels::RefQuery::kAsFused);
  const float* sharp = a.out;
  const kernels::FusedBoundInputs bi = kernels::fused_bound_inputs(kv.segs, kv.n_segs, a);
  double over_v8 = 0;
  if (kernels::fused_auto_isa(d) == kernels::FusedIsa::kAvx512Int8V &&
      std::any_of(kv.segs, kv.segs + kv.n_segs, kernels::fused_int8_values)) {
    twin.resize(n_out);
    kernels::AttnArgs t = a;
    t.out = twin.data();
    kernels::attention_paged_fused_cpu(kv.segs, kv.n_segs, t, pool, kernels::FusedIsa::kAvx512);
    over_v8 = diff(twin, a.out).first / kernels::fused_v_i8_bound(bi);
    sharp = twin.data();
  }
  const auto [err, mag] = diff(ref, sharp);
  // The int8 query's deviation (segments scored with the fp32 query have none).
  double err32 = err, mag32 = mag;
  if (std::any_of(kv.segs, kv.segs + kv.n_segs, kernels::fused_int8_query)) {
    kernels::attention_paged_ref(kv.segs, kv.n_segs, r);
    std::tie(err32, mag32) = diff(ref, a.out);
  }
  const int64_t n_total = kv.segs[kv.n_segs - 1].pos0 + kv.segs[kv.n_segs - 1].n_kv;
  const double over = std::max(err32 / kernels::fused_bound(bi, d, n_total), over_v8);
  if (log) log->record(a, err, mag, err32, mag32, over);
}

// The queries as the keys are stored: where the keys are stored rotated
// (quant/kv_rotation.h), a rotated copy in buf; else a.q itself.
const float* query_for(const kernels::AttnArgs& a, const kernels::KvView& kv,
                       std::vector<float>& buf) {
  if (!kv.segs[0].format.scheme.k_rotated) return a.q;
  const int d = kv.segs[0].format.head_dim();
  buf.assign(a.q, a.q + static_cast<size_t>(a.n_q) * a.n_heads * d);
  quant::rotate_key_rows(buf.data(), a.n_q * a.n_heads, d);
  return buf.data();
}

Status attention_cpu(const kernels::AttnArgs& a, const kernels::KvView& kv, AttnMode mode,
                     AttnCheckLog* check, ThreadPool& pool) {
  if (mode == AttnMode::kReference) {
    kernels::attention_paged_ref(kv.segs, kv.n_segs, a);
    return Status();
  }
  kernels::attention_paged_fused_cpu(kv.segs, kv.n_segs, a, pool);
  if (mode == AttnMode::kVerify) verify(a, kv, check, pool);
  return Status();
}

}  // namespace

void AttnCheckLog::record(const kernels::AttnArgs& a, double err, double mag, double err32,
                          double mag32, double over) {
  const double rel = err / std::max(mag, 1e-30);
  std::lock_guard<std::mutex> lk(mu_);
  // fp32 attention agrees to ~1e-6 relative; 1e-4 means a kernel bug, say so once.
  if (rel > 1e-4 && c_.max_rel_err <= 1e-4)
    TKV_LOG_WARN(
        "[ops] --kv-attn verify: fused and reference differ by {:.3g} (max |out| {:.3g}) at "
        "q_pos0 {} n_q {}",
        err, mag, a.q_pos0, a.n_q);
  if (over > 1 && c_.max_err_over_bound <= 1)
    TKV_LOG_WARN(
        "[ops] --kv-attn verify: fused differs from the fp32-query reference by {:.3g}, "
        "{:.3g}x its derived bound, at q_pos0 {} n_q {}",
        err32, over, a.q_pos0, a.n_q);
  ++c_.calls;
  c_.max_abs_err = std::max(c_.max_abs_err, err);
  c_.max_abs_out = std::max(c_.max_abs_out, mag);
  c_.max_rel_err = std::max(c_.max_rel_err, rel);
  c_.max_rel_err_fp32q = std::max(c_.max_rel_err_fp32q, err32 / std::max(mag32, 1e-30));
  c_.max_err_over_bound = std::max(c_.max_err_over_bound, over);
}

AttnCheck AttnCheckLog::totals() const {
  std::lock_guard<std::mutex> lk(mu_);
  return c_;
}

Status attention(const kernels::AttnArgs& a, const kernels::KvView& kv, AttnMode mode,
                 AttnCheckLog* check, ThreadPool& pool, Backend backend) {
  TKV_RETURN_IF_ERROR(check_args(a, kv));
  if (!backend_available(backend))
    return make_error(StatusCode::kUnimplemented, "[ops] attention: backend {} not available",
                      backend_name(backend));
  switch (backend) {
    case Backend::kCpu: {
      std::vector<float> q_rot;
      kernels::AttnArgs r = a;
      r.q = query_for(a, kv, q_rot);
      return attention_cpu(r, kv, mode, check, pool);
    }
    case Backend::kCuda:
      // The CUDA decode kernels read device pools (kernels/attention_cuda); a
      // cache with device pages arrives with the GPU issue, and dispatches here.
      break;
  }
  return make_error(StatusCode::kUnimplemented,
                    "[ops] attention: no {} kernel over host KV pages yet (the GPU issue)",
                    backend_name(backend));
}

Status attention_batch(const kernels::AttnArgs* a, const kernels::KvView* kv, int n, AttnMode mode,
                       AttnCheckLog* check, ThreadPool& pool, Backend backend) {
  for (int i = 0; i < n; ++i) TKV_RETURN_IF_ERROR(check_args(a[i], kv[i]));
  if (n <= 1 || mode != AttnMode::kFused || backend != Backend::kCpu) {
    for (int i = 0; i < n; ++i)
      TKV_RETURN_IF_ERROR(attention(a[i], kv[i], mode, check, pool, backend));
    return Status();
  }
  std::vector<std::vector<float>> q_rot(static_cast<size_t>(n));
  std::vector<kernels::FusedCall> calls(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    const size_t k = static_cast<size_t>(i);
    calls[k] = {kv[i].segs, kv[i].n_segs, a[i]};
    calls[k].a.q = query_for(a[i], kv[i], q_rot[k]);
  }
  kernels::attention_paged_fused_cpu_batch(calls.data(), n, pool);
  return Status();
}

}  // namespace tkv::ops
