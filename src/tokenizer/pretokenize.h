// Pre-tokenizers of the byte-level BPE models: the split regexes that llama.cpp
// applies before merging (gpt2, smollm = digits isolated then gpt2, qwen2,
// llama-bpe = Llama-3, and llama.cpp's "default" set), written by hand as
// scanners over codepoints. Each pass splits the fragments of the previous one.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tkv::tok {

enum class PreType { kDefault, kGpt2, kSmollm, kQwen2, kLlama3 };

// Maps tokenizer.ggml.pre to a PreType; false if the name is unknown.
bool pre_type_from_name(std::string_view name, PreType* out);

// Splits `text` into words (codepoint lengths of consecutive fragments). Invalid
// UTF-8 bytes become U+FFFD first, as in llama.cpp.
std::vector<size_t> pre_split(const std::vector<uint32_t>& cpts, PreType pre);

// Words of `text` with every byte mapped through GPT-2's byte->unicode table.
std::vector<std::string> pretokenize_byte_level(std::string_view text, PreType pre);

}  // namespace tkv::tok
