// Chat formats known to the tokenizer, detected from tokenizer.chat_template
// the way llama.cpp's llm_chat_detect_template does (ChatML: "<|im_start|>";
// Gemma: "<start_of_turn>"), plus the default system prompt a ChatML Jinja
// template injects when the conversation has none (SmolLM2, Qwen2.5).
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "tokenizer/tokenizer.h"

namespace tkv::tok {

enum class ChatFormat { kNone, kChatml, kGemma };

struct ChatTemplate {
  ChatFormat format = ChatFormat::kNone;
  std::string default_system;  // ChatML only; "" if the template has none

  // `tmpl` is the GGUF's Jinja source ("" if absent); `has_gemma_turns` says the
  // vocabulary has <start_of_turn>/<end_of_turn> (used when tmpl is empty).
  static ChatTemplate detect(std::string_view tmpl, bool has_gemma_turns);
  Result<std::string> render(const std::vector<ChatMessage>& msgs, bool add_assistant) const;
};

}  // namespace tkv::tok
