// turbokv's public C++ API: an Engine that loads a GGUF model, owns a
// quantized paged KV cache and runs every submitted request in one continuously
// batched loop on its own thread. Submit a Request, read its RequestHandle
// (blocking event queue or a callback), cancel it from any thread; score()
// gives teacher-forced logits. Everything here is pimpl: no engine internals.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "turbokv/kv_config.h"
#include "turbokv/kv_events.h"
#include "turbokv/request.h"
#include "turbokv/status.h"

namespace turbokv {

// Attention over a quantized cache: the fused kernel, the scalar reference, or
// the fused one checked against the reference on every call.
enum class AttnPath { kFused, kReference, kVerify };

// Where the forward pass runs (--device). kCuda: one CUDA GPU; fails at
// Engine::create with the reason when this build has no CUDA or no GPU is visible.
enum class Device { kCpu, kCuda };
// "cpu" | "cuda"; the error lists the valid values.
Result<Device> parse_device(std::string_view text);
const char* device_name(Device d);

struct EngineConfig {
  std::string model_path;      // GGUF file
  KvConfig kv;                 // --kv-quant
  int64_t context = 4096;      // most tokens one sequence holds (prompt + output)
  int max_seqs = 8;            // sequences running at once
  int threads = 0;             // 0 = all cores
  size_t kv_budget_bytes = 0;  // 0 = half of available memory minus the model
  int64_t step_tokens = 512;   // most tokens per forward step (>= max_seqs)
  bool prefix_cache = true;    // reuse cached prompt prefixes across requests
  int64_t quant_start = 0;     // first tokens of a sequence kept bf16
  bool swa_bf16 = false;       // sliding-window layers keep a bf16 cache
  AttnPath attn = AttnPath::kFused;
  bool key_center = true;  // store keys minus the K bias (exact for attention)
  int page_size = 64;      // tokens per KV page
  // Disk prompt cache: full KV pages of finished requests kept in this directory
  // (shared safely by processes), loaded instead of prefilled by a later request
  // (or a restarted engine) whose prompt starts with them. Empty = off.
  std::string prompt_cache_dir;
  int64_t prompt_cache_bytes = int64_t{4} << 30;  // the directory's size limit (LRU)
  // A smaller model with this model's tokenizer for speculative decoding
  // (requests with SpecKind::kDraft); its KV cache uses `kv`. Empty = none.
  std::string draft_model_path;
  // Prefix-cache events (kv_events.h); empty = not recorded. Needs prefix_cache.
  KvEventsCallback on_kv_events;
  Device device = Device::kCpu;
};

struct ModelInfo {
  std::string arch;  // GGUF general.architecture: llama, qwen2, gemma3, ...
  std::string name;  // general.name
  int n_layers = 0, n_heads = 0, n_kv_heads = 0, head_dim = 0, d_model = 0, n_vocab = 0;
  int64_t n_ctx_train = 0;            // the context the model was trained for
  bool has_chat_template = false;     // tokenizer.chat_template present
  size_t weight_bytes_per_token = 0;  // weights read per decoded token
  size_t file_bytes = 0;
};

struct KvInfo {
  std::string scheme;          // as built: "bf16", "turbo:k8v3", "+bf16<N", "+swa-bf16"
  size_t bytes_per_token = 0;  // all layers and kv heads
  size_t allocated_bytes = 0;  // pools as mapped (touched lazily)
  int64_t pool_tokens = 0;     // tokens the pool holds, all sequences together
  int64_t context = 0;         // per sequence
  int page_size = 0;

  // Sliding-window layers' bytes per sequence (bounded by the window; 0 without).
  size_t window_bytes_per_seq = 0;
  // The scheme's own stored bits per K or V element, scales included (layers
  // kept bf16 by swa_bf16 or quant_start not counted; 16 for bf16/f16).
  double format_bits_per_elem = 16;
  // AttnPath::kVerify: how far the fused kernel was from the reference so far.
  int64_t verify_calls = 0;
  double verify_max_abs_err = 0, verify_max_abs_out = 0, verify_max_rel_err = 0;
};

struct EngineStats {
  int running = 0, waiting = 0;
  int64_t kv_pages_total = 0, kv_pages_used = 0, kv_pages_free = 0;  // full-attention pool
  int64_t steps = 0, preemptions = 0;
  int64_t prefix_hits = 0, prefix_tokens_reused = 0;
  // Full blocks in the prefix cache now, and cached blocks evicted so far.
  int64_t prefix_cache_blocks = 0, prefix_cache_evictions = 0;
  double attention_ms = 0;  // wall time spent in KV attention since the engine started
  // Speculative decoding since the engine started: draft tokens verified, kept.
  int64_t spec_drafted_tokens = 0, spec_accepted_tokens = 0;
  // Disk prompt cache since the engine started (zeros when off): entries served
  // and their tokens, entries written, write failures, corrupt or foreign
  // entries refused, LRU evictions, and the directory's bytes.
  int64_t prompt_cache_hits = 0, prompt_cache_tokens = 0, prompt_cache_writes = 0;
  int64_t prompt_cache_write_errors = 0, prompt_cache_skipped = 0, prompt_cache_evictions = 0;
  int64_t prompt_cache_bytes = 0;
};

// The model's tokenizer, owned by the engine.
class Tokenizer {
 public:
  // add_special: BOS/EOS as the model's metadata says; parse_special: control
  // token texts such as "<|im_start|>" in text become their ids.
  std::vector<int32_t> encode(std::string_view text, bool add_special = true,
                              bool parse_special = true) const;
  std::string decode(const std::vector<int32_t>& ids) const;
  std::string token_to_piece(int32_t id) const;
  // The conversation in the model's chat format (+ the assistant opening).
  Result<std::string> apply_chat_template(const std::vector<ChatMessage>& msgs,
                                          bool add_assistant = true) const;
  bool is_eog(int32_t id) const;
  bool add_bos() const;  // encode(add_special = true) puts BOS first
  int32_t n_vocab() const;
  int32_t bos_id() const;  // -1 if none
  int32_t eos_id() const;  // -1 if none

  struct Impl;
  explicit Tokenizer(const Impl* impl) : impl_(impl) {}

 private:
  const Impl* impl_;
};

class RequestHandle {
 public:
  RequestHandle() = default;
  // Next event, blocking; false after the final one was returned (at once for
  // a request with an on_token callback).
  bool next(Event& e);
  // Blocks until the request ends; its final event (finish, held-back text, timings).
  Event wait();
  // From any thread: the request ends (kCancelled) and its KV pages are freed
  // at the engine's next step.
  void cancel();
  bool done() const;
  bool valid() const { return static_cast<bool>(impl_); }

  struct Impl;
  explicit RequestHandle(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

 private:
  std::shared_ptr<Impl> impl_;
};

// score(): which positions get logits, and how the tokens are fed.
struct ScoreOptions {
  // Positions before this are prefilled without logits (one forward chunk ends
  // here); on_logits starts at this position. Valid: 0 to tokens - 1.
  int64_t logits_from = 0;
  // From logits_from on, at most this many tokens per forward step (0 = as many
  // as the step budget allows; 1 = the serving decode path, one token a step).
  int64_t tokens_per_step = 0;
};

// generate(): a whole completion at once.
struct Completion {
  std::string text;
  std::vector<int32_t> tokens;  // streamed tokens (eos / stop tokens excluded)
  FinishReason finish = FinishReason::kNone;
  std::string error;
  Timings timings;
};

// The header of a KV snapshot file (Request::save_session), for `turbokv kv
// inspect`: checked (magic, version, header checksum), pages not read.
struct SnapshotInfo {
  uint32_t version = 0;
  std::string scheme;  // "bf16", "turbo:k8v3", ...
  std::string kind;    // "bf16" | "f16" | "affine" | "turbo"
  int k_bits = 0, v_bits = 0;
  uint64_t model_id = 0;  // hash of the model's tensors and forward metadata
  int n_layers = 0, n_kv_heads = 0, head_dim = 0, page_size = 0;
  bool key_center = false;
  int64_t quant_start = 0;
  bool swa_bf16 = false;
  int64_t n_tokens = 0;
  std::vector<int32_t> tokens;
  size_t file_bytes = 0;
  size_t header_bytes = 0;
};
Result<SnapshotInfo> inspect_snapshot(const std::string& path);

class Engine {
 public:
  // Loads the model and builds the cache. Refused here, with the model, the value
  // and the valid ones named: a KV scheme the model's head_dim does not support,
  // a KV budget that cannot hold one full context, out-of-range sizes.
  static Result<std::unique_ptr<Engine>> create(const EngineConfig& cfg);
  ~Engine();  // open requests end as kCancelled
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Queues a request. Refused here: no prompt, a prompt longer than the context,
  // token ids outside the vocabulary, sampling values out of range, chat
  // messages for a model without a chat template.
  Result<RequestHandle> submit(const Request& r);
  // submit + read to the end.
  Result<Completion> generate(const Request& r);
  // Teacher-forced logits of tokens (at most the context; split longer texts):
  // on_logits(pos0, rows, logits[rows * n_vocab]) for consecutive chunks, from
  // opts.logits_from on, on the engine thread; returns when all positions were
  // delivered. Row i is the distribution after tokens[0 .. pos0 + i].
  using LogitsCallback = std::function<void(int64_t pos0, int64_t rows, const float* logits)>;
  Status score(const std::vector<int32_t>& tokens, const LogitsCallback& on_logits,
               const ScoreOptions& opts = {});

  const ModelInfo& model_info() const;
  KvInfo kv_info() const;
  // Bytes n tokens of one sequence occupy in the cache (the first quant_start
  // tokens at bf16 cost).
  size_t kv_bytes_for_tokens(int64_t n) const;
  // The longest context one sequence could hold if its cache had budget_bytes
  // (this scheme, quant_start and sliding-window share included); 0 if none.
  int64_t kv_max_context(size_t budget_bytes) const;
  const Tokenizer& tokenizer() const;
  const EngineConfig& config() const;
  EngineStats stats() const;

 private:
  struct Impl;
  explicit Engine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace turbokv
