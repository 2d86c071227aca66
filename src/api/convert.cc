// Public <-> runtime type mapping (see convert.h), finish_reason_name and the public
// sampling check (turbokv::validate).
#include "api/convert.h"

#include "runtime/kv_auto.h"

namespace turbokv {

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::kNone:
      return "running";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kEos:
      return "eos";
    case FinishReason::kStopString:
      return "stop";
    case FinishReason::kStopToken:
      return "stop token";
    case FinishReason::kCancelled:
      return "cancelled";
    case FinishReason::kContextFull:
      return "context full";
    case FinishReason::kError:
      return "error";
  }
  return "?";
}

Result<Device> parse_device(std::string_view text) {
  if (text == "cpu") return Device::kCpu;
  if (text == "cuda") return Device::kCuda;
  return Status(StatusCode::kInvalidArgument,
                "[api] unknown device '" + std::string(text) + "' (valid: cpu | cuda)");
}

const char* device_name(Device d) {
  return d == Device::kCuda ? "cuda" : "cpu";
}

namespace detail {
namespace rt = tkv::runtime;

tkv::quant::KvScheme to_scheme(const KvConfig& c) {
  namespace q = tkv::quant;
  q::KvScheme s{q::KvKind::kBf16, 16, 16, 128};  // head_dim: the cache takes the model's
  switch (c.kind) {
    case KvConfig::Kind::kBf16:
    case KvConfig::Kind::kAuto:  // picked at load (LoopOptions::kv_auto_bits)
      return s;
    case KvConfig::Kind::kF16:
      s.kind = q::KvKind::kF16;
      return s;
    case KvConfig::Kind::kAffine:
      s.kind = q::KvKind::kAffine;
      break;
    case KvConfig::Kind::kTurbo:
      s.kind = q::KvKind::kTurbo;
      break;
  }
  s.k_bits = c.key_bits;
  s.v_bits = c.value_bits;
  s.k_rotated = c.rotated_keys;
  s.k_symmetric = c.symmetric_keys;
  s.v_mse_scale = c.fitted_value_scale;
  s.v_absmax = c.absmax_values;
  return s;
}

rt::LoopOptions to_runtime(const EngineConfig& c) {
  rt::LoopOptions o;
  o.model_path = c.model_path;
  o.cache.scheme = to_scheme(c.kv);
  if (c.kv.kind == KvConfig::Kind::kAuto)
    o.kv_auto_bits = c.kv.auto_bits > 0 ? c.kv.auto_bits : tkv::runtime::kAutoKvDefaultBits;
  o.cache.page_size = c.page_size;
  o.cache.quant_start = c.quant_start;
  o.cache.swa_bf16 = c.swa_bf16;
  o.attn = c.attn == AttnPath::kReference ? tkv::ops::AttnMode::kReference
           : c.attn == AttnPath::kVerify  ? tkv::ops::AttnMode::kVerify
                                          : tkv::ops::AttnMode::kFused;
  o.context = c.context;
  o.max_seqs = c.max_seqs;
  o.n_threads = c.threads;
  o.kv_budget_bytes = c.kv_budget_bytes;
  o.step_tokens = c.step_tokens;
  o.prefix_cache = c.prefix_cache;
  o.key_center = c.key_center;
  o.prompt_cache_dir = c.prompt_cache_dir;
  o.prompt_cache_bytes = c.prompt_cache_bytes;
  o.draft_model_path = c.draft_model_path;
  if (c.on_kv_events)
    o.on_prefix_events = [cb = c.on_kv_events,
                          bs = c.page_size](std::vector<tkv::kv::PrefixEvent>&& in) {
      cb(to_public(std::move(in), bs));
    };
  o.backend = c.device == Device::kCuda ? tkv::ops::Backend::kCuda : tkv::ops::Backend::kCpu;
  return o;
}

std::vector<KvEvent> to_public(std::vector<tkv::kv::PrefixEvent>&& in, int block_size) {
  using K = tkv::kv::PrefixEvent::Kind;
  std::vector<KvEvent> out(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    tkv::kv::PrefixEvent& e = in[i];
    KvEvent& o = out[i];
    o.kind = e.kind == K::kStored    ? KvEvent::Kind::kBlockStored
             : e.kind == K::kRemoved ? KvEvent::Kind::kBlockRemoved
                                     : KvEvent::Kind::kAllBlocksCleared;
    o.block_hashes = std::move(e.keys);
    if (e.kind == K::kStored && e.parent != 0) o.parent_block_hash = e.parent;
    o.token_ids = std::move(e.tokens);
    o.block_size = block_size;
  }
  return out;
}

tkv::sampling::SamplerParams to_runtime(const SamplingParams& p) {
  tkv::sampling::SamplerParams s;
  s.temperature = p.temperature;
  s.top_k = p.top_k;
  s.top_p = p.top_p;
  s.min_p = p.min_p;
  s.repeat_penalty = p.repeat_penalty;
  s.repeat_last_n = p.repeat_last_n;
  s.frequency_penalty = p.frequency_penalty;
  s.presence_penalty = p.presence_penalty;
  s.seed = p.seed;
  return s;
}

rt::SeqRequest to_runtime(const Request& r, std::vector<int32_t> prompt) {
  rt::SeqRequest q;
  q.prompt = std::move(prompt);
  q.sampling = to_runtime(r.sampling);
  q.spec.kind = r.spec.kind == SpecKind::kNgram   ? rt::spec::Kind::kNgram
                : r.spec.kind == SpecKind::kDraft ? rt::spec::Kind::kDraft
                                                  : rt::spec::Kind::kNone;
  q.spec.max_draft = r.spec.max_draft;
  q.spec.ngram_max = r.spec.ngram_max;
  q.spec.ngram_min = r.spec.ngram_min;
  q.stop_strings = r.stop;
  q.stop_tokens = r.stop_tokens;
  q.max_tokens = r.max_tokens;
  q.priority = r.priority;
  q.ignore_eos = r.ignore_eos;
  q.logprobs = r.logprobs;
  q.on_progress = r.on_prefill_progress;
  q.save_session = r.save_session;
  q.load_session = r.load_session;
  q.load_common = r.load_session_common;
  if (r.on_token) q.on_event = [cb = r.on_token](const rt::Event& e) { cb(to_public(e)); };
  return q;
}

FinishReason to_public(rt::Finish f) {
  switch (f) {
    case rt::Finish::kNone:
      return FinishReason::kNone;
    case rt::Finish::kLength:
      return FinishReason::kLength;
    case rt::Finish::kEos:
      return FinishReason::kEos;
    case rt::Finish::kStopString:
      return FinishReason::kStopString;
    case rt::Finish::kStopToken:
      return FinishReason::kStopToken;
    case rt::Finish::kCancelled:
      return FinishReason::kCancelled;
    case rt::Finish::kContextFull:
      return FinishReason::kContextFull;
    case rt::Finish::kError:
      return FinishReason::kError;
  }
  return FinishReason::kError;
}

Timings to_public(const rt::Timings& t) {
  Timings p;
  p.queue_ms = t.queue_ms;
  p.ttft_ms = t.ttft_ms;
  p.prefill_ms = t.prefill_ms;
  p.prefill_tokens = t.prefill_tokens;
  p.cached_tokens = t.cached_tokens;
  p.generated_tokens = t.generated_tokens;
  p.decode_tokens = t.decode_tokens;
  p.decode_ms = t.decode_ms;
  p.preemptions = t.preemptions;
  p.drafted_tokens = t.drafted_tokens;
  p.accepted_tokens = t.accepted_tokens;
  return p;
}

Event to_public(const rt::Event& e) {
  Event p;
  p.token = e.token;
  p.text = e.text;
  p.finish = to_public(e.finish);
  p.error = e.error;
  p.timings = to_public(e.timings);
  p.session_error = e.session_error;
  p.session_tokens = e.session_tokens;
  p.logprob = e.logprob;
  p.top_logprobs.reserve(e.top_logprobs.size());
  for (const auto& t : e.top_logprobs) p.top_logprobs.push_back({t.token, t.logprob});
  return p;
}

}  // namespace detail

Status validate(const SamplingParams& p) {
  return tkv::sampling::validate(detail::to_runtime(p));
}

}  // namespace turbokv
