// libFuzzer target: chat template detection and rendering over arbitrary
// template sources, roles and message contents must give a string or a
// "[...]" Status, never a crash. Input layout: byte 0 picks the template source
// (ChatML, Gemma, or the next 0-separated field as a raw Jinja source) and
// add_assistant; the rest is role\0content\0role\0content...
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/chat_template.h"

namespace {
std::vector<std::string_view> split(std::string_view s) {
  std::vector<std::string_view> out;
  size_t start = 0;
  for (size_t i = 0; i <= s.size(); ++i) {
    if (i == s.size() || s[i] == '\0') {
      out.push_back(s.substr(start, i - start));
      start = i + 1;
    }
  }
  return out;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t mode = data[0];
  std::vector<std::string_view> fields =
      split(std::string_view(reinterpret_cast<const char*>(data) + 1, size - 1));
  std::string tmpl;
  switch (mode % 4) {
    case 0:
      tmpl = "{% for m in messages %}<|im_start|>{{ m.role }}\n";
      break;
    case 1:
      tmpl = "{{ bos_token }}<start_of_turn>";
      break;
    case 2:
      break;  // no template: the vocabulary decides (has_gemma_turns)
    default:
      tmpl = std::string(fields.front());
      fields.erase(fields.begin());
  }
  const bool gemma_turns = mode & 4;
  const bool add_assistant = mode & 8;
  const tkv::tok::ChatTemplate t = tkv::tok::ChatTemplate::detect(tmpl, gemma_turns);
  std::vector<tkv::tok::ChatMessage> msgs;
  for (size_t i = 0; i + 1 < fields.size(); i += 2)
    msgs.push_back({std::string(fields[i]), std::string(fields[i + 1])});
  auto r = t.render(msgs, add_assistant);
  if (!r.ok() && r.status().message().empty()) std::abort();  // an error must say what
  if (r.ok() && t.format == tkv::tok::ChatFormat::kChatml) {
    // ChatML copies every message's content verbatim (Gemma trims it).
    for (const auto& m : msgs)
      if (r.value().find(m.content) == std::string::npos) std::abort();
  }
  return 0;
}
