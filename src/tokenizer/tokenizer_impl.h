// Shared implementation of both tokenizer kinds: the special-token partition,
// BOS/EOS handling, EOG, pieces and chat templates live in VocabTokenizer; the
// subclasses (bpe.cc: byte-level BPE, spm.cc: SentencePiece-style) only turn
// one raw-text fragment into ids. Internal header, not part of the API.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab.h"

namespace tkv::tok {

class VocabTokenizer : public Tokenizer {
 public:
  std::vector<int32_t> encode(std::string_view text, bool add_special,
                              bool parse_special) const override;
  int32_t n_vocab() const override { return vocab_.n_tokens(); }
  int32_t bos_id() const override { return vocab_.bos_id; }
  int32_t eos_id() const override { return vocab_.eos_id; }
  bool is_eog(int32_t id) const override { return vocab_.is_eog(id); }
  bool add_bos() const override { return add_bos_; }
  Result<std::string> apply_chat_template(const std::vector<ChatMessage>& msgs,
                                          bool add_assistant) const override {
    return chat_.render(msgs, add_assistant);
  }
  const Vocab& vocab() const { return vocab_; }

 protected:
  // Appends the ids of one raw fragment; prev_special: the fragment starts the
  // text or follows a special token (SentencePiece's space-prefix rule).
  virtual void encode_fragment(std::string_view text, bool prev_special,
                               std::vector<int32_t>& out) const = 0;
  Status init_common(VocabData& d, bool default_add_bos);

  Vocab vocab_;
  bool add_bos_ = false, add_eos_ = false;
  ChatTemplate chat_;
};

// The byte of a "<0xXX>" token text ("" if the text is malformed).
std::string byte_piece(const std::string& text);

Result<std::unique_ptr<Tokenizer>> make_bpe_tokenizer(VocabData& d);
Result<std::unique_ptr<Tokenizer>> make_spm_tokenizer(VocabData& d);

}  // namespace tkv::tok
