// Paths of the real models used by end-to-end tests ($TKV_MODEL_DIR or
// ~/.cache/turbokv/models); tests skip with a reason when a file is absent.
#pragma once
#include <cstdlib>
#include <filesystem>
#include <string>

#include "tests/sanitized.h"

namespace tkv::testing {
inline std::string model_dir() {
  if (const char* d = std::getenv("TKV_MODEL_DIR")) return d;
  const char* h = std::getenv("HOME");
  return std::string(h ? h : ".") + "/.cache/turbokv/models";
}
inline std::string smollm2_path() {
  return model_dir() + "/SmolLM2-135M-Instruct.Q4_1.gguf";
}
inline std::string gemma3_path() {
  return model_dir() + "/gemma-3-270m-q4_k_m.gguf";
}
inline std::string qwen15_path() {
  return model_dir() + "/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf";
}
inline bool have(const std::string& p) {
  return std::filesystem::exists(p);
}
}  // namespace tkv::testing
