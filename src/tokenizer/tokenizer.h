// Tokenizer built from GGUF metadata (tokenizer.ggml.*): byte-level BPE
// (gpt2 model; pre-tokenizers smollm, qwen2, llama-bpe, default gpt2) and
// SentencePiece-style BPE with byte fallback (llama/gemma model types).
// Token-for-token parity with llama.cpp's tokenizer is the contract.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace tkv::io {
class GgufFile;
}

namespace tkv::tok {

struct ChatMessage {
  std::string role;  // "system" | "user" | "assistant"
  std::string content;
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // Reads tokenizer.ggml.{model,pre,tokens,scores,token_type,merges,bos/eos ids,add_bos_token,...}.
  static Result<std::unique_ptr<Tokenizer>> from_gguf(const io::GgufFile& gguf);

  // add_special: prepend BOS (and append EOS) as the model's metadata says,
  // exactly like llama_tokenize(add_special). parse_special: recognise
  // control/user-defined token texts such as "<|im_start|>" in the input.
  virtual std::vector<int32_t> encode(std::string_view text, bool add_special,
                                      bool parse_special) const = 0;
  // Bytes of one token as it appears in output (byte-fallback tokens decoded,
  // SentencePiece '▁' turned into ' '). Control tokens give "" unless render_special.
  virtual std::string token_to_piece(int32_t id, bool render_special = false) const = 0;
  std::string decode(const std::vector<int32_t>& ids, bool render_special = false) const;

  virtual int32_t n_vocab() const = 0;
  virtual int32_t bos_id() const = 0;  // -1 if none
  virtual int32_t eos_id() const = 0;  // -1 if none
  virtual bool is_eog(
      int32_t id) const = 0;  // end of generation (eos, eot, <|im_end|>, <end_of_turn>)
  virtual bool add_bos() const = 0;

  // Renders a conversation with the model's chat format (ChatML for SmolLM2 and
  // Qwen2; Gemma's <start_of_turn> format) and, if add_assistant, the opening
  // of the assistant turn. Error if the model has no known chat format.
  virtual Result<std::string> apply_chat_template(const std::vector<ChatMessage>& msgs,
                                                  bool add_assistant) const = 0;
};

}  // namespace tkv::tok
