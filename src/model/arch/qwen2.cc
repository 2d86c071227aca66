// Qwen2 decoder: Llama block with biases on Q, K, V and NEOX (half-split)
// rope. Reference: llama.cpp llm_build_qwen2.
#include "io/gguf.h"
#include "model/registry.h"

namespace tkv::model {
namespace {
Status configure_qwen2(const io::GgufFile& g, ModelConfig& cfg) {
  TKV_RETURN_IF_ERROR(read_common_hparams(g, "qwen2", cfg));
  cfg.rope_mode = kernels::RopeMode::kNeox;
  cfg.qkv_bias = true;
  cfg.ffn_act = FfnAct::kSilu;
  return Status();
}
const ArchRegistrar kReg({"qwen2", &configure_qwen2});
}  // namespace
}  // namespace tkv::model
