// Llama-family decoder (SmolLM2): RMSNorm, SwiGLU, rope over adjacent pairs
// (the GGUF converter permuted Q/K rows for ggml's NORM rope), tied embeddings
// when output.weight is absent. Reference: llama.cpp llm_build_llama.
#include "io/gguf.h"
#include "model/registry.h"

namespace tkv::model {
namespace {
Status configure_llama(const io::GgufFile& g, ModelConfig& cfg) {
  TKV_RETURN_IF_ERROR(read_common_hparams(g, "llama", cfg));
  cfg.rope_mode = kernels::RopeMode::kNorm;
  cfg.ffn_act = FfnAct::kSilu;
  return Status();
}
const ArchRegistrar kReg({"llama", &configure_llama});
}  // namespace
}  // namespace tkv::model
