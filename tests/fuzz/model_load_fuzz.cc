// libFuzzer target: GGUF bytes -> model load (architecture, hparams, weight
// binding) -> tokenizer -> a small KV cache -> one forward pass of two tokens.
// Any input must end in a Status naming its component, never a crash, hang or
// runaway allocation (run with -rss_limit_mb / -malloc_limit_mb). Model::load
// takes a path, so each input is written to a file in /dev/shm first.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "base/log.h"
#include "base/thread_pool.h"
#include "kvcache/kv_cache.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace {
std::string g_path;

void must_name_component(const tkv::Status& s) {
  if (s.message().empty() || s.message()[0] != '[') std::abort();
}
}  // namespace

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  tkv::set_log_level(tkv::LogLevel::kError);
  const char* dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
  g_path = std::string(dir) + "/tkv-model-fuzz-" + std::to_string(getpid()) + ".gguf";
  std::atexit([] { std::remove(g_path.c_str()); });
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  {
    std::FILE* f = std::fopen(g_path.c_str(), "wb");
    if (!f || std::fwrite(data, 1, size, f) != size) std::abort();
    std::fclose(f);
  }
  auto m = tkv::model::Model::load(g_path);
  if (!m.ok()) return must_name_component(m.status()), 0;
  tkv::model::Model& model = *m.value();
  auto tok = tkv::tok::Tokenizer::from_gguf(model.gguf());
  if (!tok.ok()) return must_name_component(tok.status()), 0;
  tkv::kv::CacheOptions opts;
  static const char* kSchemes[] = {"bf16", "turbo:k8v4", "turbo:k4v2"};
  opts.scheme = tkv::kv::parse_kv_quant(kSchemes[data[size - 1] % 3]).value();
  opts.page_size = 16;
  opts.max_tokens = 64;
  opts.max_seqs = 1;
  opts.max_chunk_tokens = 16;
  auto cache = tkv::kv::create_cache(model.kv_shape(), opts);
  if (!cache.ok()) return must_name_component(cache.status()), 0;
  const int64_t nv = model.config().n_vocab;
  const int32_t tokens[2] = {0, static_cast<int32_t>(nv > 1 ? 1 : 0)};
  static tkv::ThreadPool pool(1);
  auto seq = cache.value()->create_seq();
  if (!seq.ok()) return must_name_component(seq.status()), 0;
  tkv::model::Batch b;
  b.add(seq.value(), tokens, 2, tkv::model::LogitsWanted::kLast);
  tkv::model::Workspace ws;
  tkv::Status s = model.forward(b, ws, *cache.value(), pool);
  if (!s.ok()) must_name_component(s);
  return 0;
}
