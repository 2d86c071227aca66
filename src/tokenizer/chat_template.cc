// Chat template detection and rendering. ChatML follows llama.cpp's
// LLM_CHAT_TEMPLATE_CHATML plus the model's own default system turn (what its
// Jinja template renders when messages[0] is not a system message); Gemma
// follows LLM_CHAT_TEMPLATE_GEMMA (system text merged into the first user turn,
// contents trimmed, "assistant" renamed "model"; BOS comes from the tokenizer).
#include "tokenizer/chat_template.h"

namespace tkv::tok {
namespace {

// Jinja string-literal escapes that occur in these templates.
std::string unescape(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 1 < s.size()) {
      const char c = s[++i];
      out += c == 'n' ? '\n' : c == 't' ? '\t' : c;
    } else {
      out += s[i];
    }
  }
  return out;
}

// Finds a literal "<|im_start|>system\n<text><|im_end|>" inside one string
// literal of the template, i.e. a hard-coded default system prompt.
std::string find_default_system(std::string_view t) {
  static constexpr std::string_view kOpen = "<|im_start|>system";
  static constexpr std::string_view kClose = "<|im_end|>";
  for (size_t at = t.find(kOpen); at != std::string_view::npos; at = t.find(kOpen, at + 1)) {
    size_t p = at + kOpen.size();
    if (t.substr(p, 1) == "\n") {
      p += 1;
    } else if (t.substr(p, 2) == "\\n") {
      p += 2;
    } else {
      continue;
    }
    const size_t close = t.find(kClose, p);
    const size_t quote = t.find_first_of("'\"", p);
    if (close == std::string_view::npos || close == p ||
        (quote != std::string_view::npos && quote < close))
      continue;
    return unescape(t.substr(p, close - p));
  }
  return "";
}

std::string trim(std::string_view s) {
  const char* ws = " \t\n\r\v\f";
  const size_t b = s.find_first_not_of(ws);
  if (b == std::string_view::npos) return "";
  return std::string(s.substr(b, s.find_last_not_of(ws) - b + 1));
}

}  // namespace

ChatTemplate ChatTemplate::detect(std::string_view tmpl, bool has_gemma_turns) {
  ChatTemplate ct;
  if (tmpl.find("<|im_start|>") != std::string_view::npos) {
    ct.format = ChatFormat::kChatml;
    ct.default_system = find_default_system(tmpl);
  } else if (tmpl.find("<start_of_turn>") != std::string_view::npos ||
             (tmpl.empty() && has_gemma_turns)) {
    ct.format = ChatFormat::kGemma;
  }
  return ct;
}

Result<std::string> ChatTemplate::render(const std::vector<ChatMessage>& msgs,
                                         bool add_assistant) const {
  std::string out;
  if (format == ChatFormat::kChatml) {
    if (!msgs.empty() && msgs[0].role != "system" && !default_system.empty())
      out += "<|im_start|>system\n" + default_system + "<|im_end|>\n";
    for (const ChatMessage& m : msgs)
      out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
    if (add_assistant) out += "<|im_start|>assistant\n";
    return out;
  }
  if (format == ChatFormat::kGemma) {
    std::string system;
    for (const ChatMessage& m : msgs) {
      if (m.role == "system") {
        system += trim(m.content);
        continue;
      }
      const std::string role = m.role == "assistant" ? "model" : m.role;
      out += "<start_of_turn>" + role + "\n";
      if (!system.empty() && role != "model") {
        out += system + "\n\n";
        system.clear();
      }
      out += trim(m.content) + "<end_of_turn>\n";
    }
    if (add_assistant) out += "<start_of_turn>model\n";
    return out;
  }
  return Status(StatusCode::kUnimplemented, "[tokenizer] model has no known chat template format");
}

}  // namespace tkv::tok
