// Tokenizer entry points: GGUF metadata -> VocabData -> BPE or SPM tokenizer,
// plus the parts common to both (partition + BOS/EOS in encode, decode).
// Follows llama.cpp llama_vocab::impl::load / tokenize for defaults and order.
#include "tokenizer/tokenizer.h"

#include <cmath>

#include "io/gguf.h"
#include "tokenizer/tokenizer_impl.h"

namespace tkv::tok {
namespace {

// GGUF token types are 0..6 (undefined, normal, unknown, control, user, unused,
// byte); a few files carry small out-of-spec values, so any int32 is accepted.
constexpr double kMinTokenType = -2147483648.0;
constexpr double kMaxTokenType = 2147483647.0;

int32_t opt_id(const io::GgufFile& g, std::string_view key) {
  auto r = g.get_u64(key);
  return r.ok() && *r < (1ull << 31) ? static_cast<int32_t>(*r) : -1;
}
int32_t opt_bool(const io::GgufFile& g, std::string_view key) {
  auto r = g.get_bool(key);
  return r.ok() ? (*r ? 1 : 0) : -1;
}

}  // namespace

Result<VocabData> vocab_data_from_gguf(const io::GgufFile& g) {
  VocabData d;
  TKV_ASSIGN_OR_RETURN(d.model, g.get_string("tokenizer.ggml.model"));
  d.pre = g.get_string_or("tokenizer.ggml.pre", "");
  TKV_ASSIGN_OR_RETURN(d.tokens, g.get_string_array("tokenizer.ggml.tokens"));
  if (g.find("tokenizer.ggml.scores")) {
    TKV_ASSIGN_OR_RETURN(std::vector<double> s, g.get_number_array("tokenizer.ggml.scores"));
    for (double v : s)
      if (!std::isfinite(v) || std::fabs(v) > 3.0e38)
        return invalid_argument("[tokenizer] {}: a token score ({}) is not a finite float",
                                g.path(), v);
    d.scores.assign(s.begin(), s.end());
  }
  if (g.find("tokenizer.ggml.token_type")) {
    TKV_ASSIGN_OR_RETURN(std::vector<double> t, g.get_number_array("tokenizer.ggml.token_type"));
    d.token_types.reserve(t.size());
    for (size_t i = 0; i < t.size(); ++i) {
      // The array may hold floats: converting one outside int32 is undefined, so check first.
      if (!(t[i] >= kMinTokenType && t[i] <= kMaxTokenType) || t[i] != std::floor(t[i]))
        return invalid_argument("[tokenizer] {}: token_type[{}] = {} is not an integer in [{}, {}]",
                                g.path(), i, t[i], kMinTokenType, kMaxTokenType);
      d.token_types.push_back(static_cast<int32_t>(t[i]));
    }
  }
  if (g.find("tokenizer.ggml.merges")) {
    TKV_ASSIGN_OR_RETURN(d.merges, g.get_string_array("tokenizer.ggml.merges"));
  }
  // Ids absent from the metadata stay -1 here; make_tokenizer applies the
  // per-model defaults llama.cpp uses.
  d.bos_id = opt_id(g, "tokenizer.ggml.bos_token_id");
  d.eos_id = opt_id(g, "tokenizer.ggml.eos_token_id");
  d.eot_id = opt_id(g, "tokenizer.ggml.eot_token_id");
  d.eom_id = opt_id(g, "tokenizer.ggml.eom_token_id");
  d.unk_id = opt_id(g, "tokenizer.ggml.unknown_token_id");
  d.pad_id = opt_id(g, "tokenizer.ggml.padding_token_id");
  d.add_bos = opt_bool(g, "tokenizer.ggml.add_bos_token");
  d.add_eos = opt_bool(g, "tokenizer.ggml.add_eos_token");
  d.add_space_prefix = opt_bool(g, "tokenizer.ggml.add_space_prefix");
  d.chat_template = g.get_string_or("tokenizer.chat_template", "");
  return d;
}

Result<std::unique_ptr<Tokenizer>> make_tokenizer(VocabData d) {
  if (d.model == "gpt2") return make_bpe_tokenizer(d);
  if (d.model == "llama") return make_spm_tokenizer(d);
  return invalid_argument("[tokenizer] unsupported tokenizer.ggml.model '{}'", d.model);
}

Result<std::unique_ptr<Tokenizer>> Tokenizer::from_gguf(const io::GgufFile& gguf) {
  // Vocabulary tables and regexes are built with std containers: their
  // exceptions become a Status here.
  try {
    TKV_ASSIGN_OR_RETURN(VocabData d, vocab_data_from_gguf(gguf));
    return make_tokenizer(std::move(d));
  } catch (const std::exception& e) {
    return make_error(StatusCode::kResourceExhausted, "[tokenizer] {}: loading failed: {}",
                      gguf.path(), e.what());
  }
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids, bool render_special) const {
  std::string out;
  for (int32_t id : ids) out += token_to_piece(id, render_special);
  return out;
}

std::string byte_piece(const std::string& text) {
  auto hex = [](char c) {
    return (c >= '0' && c <= '9')   ? c - '0'
           : (c >= 'A' && c <= 'F') ? c - 'A' + 10
           : (c >= 'a' && c <= 'f') ? c - 'a' + 10
                                    : -1;
  };
  if (text.size() != 6 || text.compare(0, 3, "<0x") != 0 || text[5] != '>' || hex(text[3]) < 0 ||
      hex(text[4]) < 0)
    return "";
  return std::string(1, static_cast<char>(hex(text[3]) * 16 + hex(text[4])));
}

Status VocabTokenizer::init_common(VocabData& d, bool default_add_bos) {
  TKV_RETURN_IF_ERROR(vocab_.init(d));
  add_bos_ = d.add_bos >= 0 ? d.add_bos == 1 : default_add_bos;
  add_eos_ = d.add_eos == 1;
  if (add_bos_ && vocab_.bos_id < 0)
    return invalid_argument("[tokenizer] add_bos_token set but no valid BOS id");
  if (add_eos_ && vocab_.eos_id < 0)
    return invalid_argument("[tokenizer] add_eos_token set but no valid EOS id");
  chat_ = ChatTemplate::detect(
      d.chat_template, vocab_.find("<start_of_turn>") >= 0 && vocab_.find("<end_of_turn>") >= 0);
  return Status::ok_status();
}

std::vector<int32_t> VocabTokenizer::encode(std::string_view text, bool add_special,
                                            bool parse_special) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 2);
  if (add_special && add_bos_) out.push_back(vocab_.bos_id);
  bool prev_special = true;
  for (const Fragment& f : vocab_.partition(text, parse_special)) {
    if (f.token >= 0) {
      out.push_back(f.token);
      prev_special = true;
    } else {
      encode_fragment(f.text, prev_special, out);
      prev_special = false;
    }
  }
  if (add_special && add_eos_) out.push_back(vocab_.eos_id);
  return out;
}

}  // namespace tkv::tok
