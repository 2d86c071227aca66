// Synthetic models for speed work: a GGUF of a chosen architecture and shape
// with random, well-formed weights (finite scales, mean ~0, std ~1/sqrt(d_in)),
// norms 1, and the tokenizer (and so n_vocab) copied from a real GGUF so both
// turbokv and llama.cpp load and tokenize it. Never a source of quality numbers.
// The tensor list mirrors Model::bind_weights and llama.cpp's loaders.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "io/gguf_writer.h"
#include "quant/ggml_types.h"

namespace tkv::model {

struct SynthSpec {
  std::string arch = "llama";  // llama | qwen2 | gemma3
  std::string label;           // shape name for general.name ("llama3-8b"; empty: "<arch> custom")
  int n_layers = 0;
  int d_model = 0;
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;  // 0: d_model / n_heads
  int d_ff = 0;
  int64_t n_ctx = 0;
  float rope_theta = 10000.0f;
  int64_t sliding_window = 1024;        // gemma3: window of its local layers
  ggml::Type type = ggml::Type::kQ4_0;  // the weight matrices' type; norms and biases stay f32
  uint64_t seed = 0;
  std::string tokenizer_path;  // GGUF whose tokenizer.* keys are copied
};

// Named shapes (--preset); each sets arch and every dimension.
struct SynthPreset {
  const char* name;
  SynthSpec spec;
};
const std::vector<SynthPreset>& synth_presets();

// "q4_0", "Q4_K", "f16", ...: a weight type RandomBlocks can write; the error lists them.
Result<ggml::Type> parse_weight_type(const std::string& name);
std::string weight_type_names();  // "f32, f16, bf16, q4_0, ..."

// Shape checks with the flag names in the message ("[synth] ..."); n_vocab from the tokenizer.
Status check_synth_spec(const SynthSpec& s, int64_t n_vocab);

struct SynthResult {
  int64_t n_vocab = 0;
  size_t n_tensors = 0;
  uint64_t data_bytes = 0;
};
// Checks the spec, reads the tokenizer and writes PATH (via PATH.tmp).
Result<SynthResult> write_synth_model(const SynthSpec& s, const std::string& path,
                                      const io::GgufWriter::ProgressFn& progress = {});

}  // namespace tkv::model
