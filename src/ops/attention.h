// ops::attention: causal attention of one slice's queries over a sequence's KV
// pages (kernels::KvView, handed out by KvCache::view). Picks the kernel path
// (--kv-attn) and the backend (ops/dispatch.h); the cache only stores pages.
#pragma once
#include <cstdint>
#include <mutex>

#include "base/status.h"
#include "base/thread_pool.h"
#include "kernels/attention/attention_quant.h"
#include "ops/dispatch.h"

namespace tkv::ops {

// Which attention kernel runs (--kv-attn). kVerify runs the fused kernel, then the
// reference on the same call, keeps the fused output and records how far apart
// they were (AttnCheckLog): the in-model check that the fused kernel computes
// what the oracle does, on real activations.
enum class AttnMode { kFused, kReference, kVerify };

// What --kv-attn verify saw over all calls so far. The reference is fed the fused
// kernel's own query (its int8 query on quantized keys, kernels::RefQuery::kAsFused),
// so the two differ by fp32 rounding alone; the int8 query's own deviation from the
// fp32-query reference is recorded apart, with its ratio to the derived bound
// (kernels/attention/attention_fused_bound.h).
struct AttnCheck {
  int64_t calls = 0;
  double max_abs_err = 0;         // max |fused - reference| over every output element
  double max_abs_out = 0;         // max |reference| (the scale of that error)
  double max_rel_err = 0;         // max over calls of max|diff| / max(max|ref|, 1e-30)
  double max_rel_err_fp32q = 0;   // the same against the fp32-query reference
  double max_err_over_bound = 0;  // max over calls of max|fused - fp32-query ref| / bound
};

// AttnCheck accumulated over calls; thread-safe, since attention runs for several
// sequences at once and the totals are read from other threads.
class AttnCheckLog {
 public:
  // One verified call: max |fused - ref|, max |ref| (int8-query reference), the same
  // two against the fp32-query reference, and the fp32-query error over the bound.
  void record(const kernels::AttnArgs& a, double err, double mag, double err32, double mag32,
              double over);
  AttnCheck totals() const;

 private:
  mutable std::mutex mu_;
  AttnCheck c_;
};

// Attention of a.n_q queries at positions a.q_pos0.. over kv (which must cover
// [0, a.q_pos0 + a.n_q)) into a.out, on `backend`. check: where kVerify records
// (may be null for the other modes). Fails on an invalid call or a backend that
// is not available or has no kernel for it.
Status attention(const kernels::AttnArgs& a, const kernels::KvView& kv, AttnMode mode,
                 AttnCheckLog* check, ThreadPool& pool, Backend backend = Backend::kCpu);

// The n calls of one batched step (a[i] over kv[i], one per sequence), with the result
// of calling attention() on each in turn: the fused CPU kernel runs them in one pass
// over the pool (kernels::attention_paged_fused_cpu_batch); the other modes and
// backends call them one by one. Every call is checked before any runs.
Status attention_batch(const kernels::AttnArgs* a, const kernels::KvView* kv, int n, AttnMode mode,
                       AttnCheckLog* check, ThreadPool& pool, Backend backend = Backend::kCpu);

}  // namespace tkv::ops
